package compat

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
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

// TestResizableSandboxes: a template built with maxCpuCount and
// maxMemoryMB (E2B 2.64, 2.66) says so in its info, list and builds; a
// create asks for a size up to them, which its cgroups enforce and what
// runs inside sees (lxcfs), on namespaces and gVisor; past them, or
// beyond a template without maxima, is a 400 naming the limit.
func TestResizableSandboxes(t *testing.T) {
	for _, isolation := range []string{"namespaces", "gvisor"} {
		t.Run(isolation, func(t *testing.T) {
			if isolation == "gvisor" {
				testutil.NeedRunsc(t)
			}
			srv := testutil.StartServer(t, apiKey, "--default-isolation", isolation)
			c, err := cove.NewClient(cove.WithAPIURL(srv.URL), cove.WithSandboxURL(srv.URL), cove.WithAPIKey(apiKey))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			info, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "sized", CPUCount: 1, MemoryMB: 256, MaxCPUCount: 2, MaxMemoryMB: 512,
				Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"SIZED", "1"}}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{`{"name":"bad","cpuCount":2,"maxCpuCount":1}`, `{"name":"bad","memoryMB":512,"maxMemoryMB":256}`, `{"name":"bad","maxCpuCount":65}`} {
				if code, m := apiCall(t, srv.URL, "POST", "/v3/templates", body); code != http.StatusBadRequest {
					t.Errorf("a build %s: %d %v, want 400", body, code, m)
				}
			}
			code, tpl := apiCall(t, srv.URL, "GET", "/templates/"+info.TemplateID, "")
			builds, _ := tpl["builds"].([]any)
			if code != 200 || tpl["maxCpuCount"] != 2.0 || tpl["maxMemoryMB"] != 512.0 || len(builds) != 1 ||
				builds[0].(map[string]any)["maxCpuCount"] != 2.0 || builds[0].(map[string]any)["maxMemoryMB"] != 512.0 {
				t.Errorf("the template's info: %d %v", code, tpl)
			}
			sees := func(s *cove.Sandbox) string {
				r, err := s.Commands.Run(ctx, `free -m | awk '/^Mem:/ {print $2}'; python3 -c 'import os; print(os.cpu_count())'`)
				if err != nil {
					t.Fatal(err)
				}
				return strings.ReplaceAll(strings.TrimSpace(r.Stdout), "\n", " ")
			}
			for _, c2 := range []struct {
				opts      cove.CreateOptions
				cpu, mem  int
				sees      string
				refused   string
				isolation string
			}{
				{opts: cove.CreateOptions{Template: "sized"}, cpu: 1, mem: 256, sees: "256 1"},
				{opts: cove.CreateOptions{Template: "sized", CPUCount: 2, MemoryMB: 512}, cpu: 2, mem: 512, sees: "512 2"},
				{opts: cove.CreateOptions{Template: "sized", MemoryMB: 384}, cpu: 1, mem: 384, sees: "384 1"},
				{opts: cove.CreateOptions{Template: "sized", CPUCount: 3}, refused: "cpuCount 3: template " + info.TemplateID + " allows at most 2 (its maxCpuCount)"},
				{opts: cove.CreateOptions{Template: "sized", MemoryMB: 1024}, refused: "memoryMB 1024: template " + info.TemplateID + " allows at most 512 (its maxMemoryMB)"},
				{opts: cove.CreateOptions{Template: "sized", MemoryMB: 64}, refused: "memoryMB must be 128 to 65536"},
			} {
				s, err := c.Create(ctx, c2.opts)
				if c2.refused != "" {
					var apiErr *cove.APIError
					if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(err.Error(), c2.refused) {
						t.Errorf("create %+v: %v, want 400 %q", c2.opts, err, c2.refused)
					}
					continue
				}
				if err != nil {
					t.Fatalf("create %+v: %v", c2.opts, err)
				}
				got, err := s.Info(ctx)
				if err != nil || got.CPUCount != c2.cpu || got.MemoryMB != c2.mem {
					t.Errorf("create %+v: info %+v %v, want %d CPUs and %d MiB", c2.opts, got, err, c2.cpu, c2.mem)
				}
				want := c2.sees
				if isolation == "gvisor" && c2.cpu < 2 {
					// gVisor's kernel shows at least 2 CPUs whatever the
					// quota (runsc's --cpu-num-from-quota floor); the
					// quota still holds the sandbox to its one.
					want = strings.Replace(want, " 1", " 2", 1)
				}
				if seen := sees(s); seen != want {
					t.Errorf("create %+v: inside, free -m and cpu_count say %q, want %q", c2.opts, seen, want)
				}
				if c2.opts.CPUCount == 2 { // a fork keeps its parent's size
					kids, err := s.Fork(ctx, 1, time.Minute)
					if err != nil || len(kids) != 1 {
						t.Fatalf("fork: %v %v", kids, err)
					}
					if got, err := kids[0].Info(ctx); err != nil || got.CPUCount != 2 || got.MemoryMB != 512 {
						t.Errorf("the fork of a sandbox of 2 CPUs and 512 MiB: %+v %v", got, err)
					}
					kids[0].Kill(ctx)
				}
				if err := s.Kill(ctx); err != nil {
					t.Error(err)
				}
			}
			if left := srv.Leftovers(); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}
