package compat

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestTemplatesPaged: E2B 2.64's Template.list pages GET /v2/templates
// (limit, nextToken, X-Next-Token), newest first, and Template.delete is
// DELETE /templates/{id}.
func TestTemplatesPaged(t *testing.T) {
	srv := testutil.StartServer(t, apiKey)
	c, err := cove.NewClient(cove.WithAPIURL(srv.URL), cove.WithSandboxURL(srv.URL), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var built []string
	for _, name := range []string{"paged-a", "paged-b", "paged-c"} {
		info, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: name, Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"NAME", name}}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		built = append(built, info.TemplateID)
	}
	page := func(query string) ([]string, string, int) {
		t.Helper()
		ids, next, code := listIDs(t, srv.URL, "/v2/templates"+query, "templateID")
		// The built-in templates are listed too.
		return slices.DeleteFunc(ids, func(id string) bool { return !slices.Contains(built, id) }), next, code
	}
	var seen []string
	query := "?limit=1"
	for pages := 0; ; pages++ {
		ids, next, code := page(query)
		if code != http.StatusOK || pages > 20 {
			t.Fatalf("page %d: %d", pages, code)
		}
		seen = append(seen, ids...)
		if next == "" {
			break
		}
		query = "?limit=1&nextToken=" + next
	}
	if want := []string{built[2], built[1], built[0]}; !slices.Equal(seen, want) {
		t.Errorf("pages of one: %v, want the newest first %v", seen, want)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?nextToken=garbage!"} {
		if _, _, code := page(q); code != http.StatusBadRequest {
			t.Errorf("GET /v2/templates%s: %d, want 400", q, code)
		}
	}
	if code, m := apiCall(t, srv.URL, "DELETE", "/templates/"+built[1], ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %v", code, m)
	}
	if ids, _, _ := page(""); !slices.Equal(ids, []string{built[2], built[0]}) {
		t.Errorf("after the delete: %v", ids)
	}
}
