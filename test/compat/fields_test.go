package compat

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/httpapi"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestSDKRequestFields reads the official SDK's typings (e2b's API
// schemas) and fails on a field of a create, connect, resume, list or
// network request that httpapi.SDKFields does not decide about, or that
// it names and the SDK no longer has; then sends each refused field to a
// real server, which must answer 400 naming it.
func TestSDKRequestFields(t *testing.T) {
	npmInstall(t)
	b, err := os.ReadFile("node_modules/e2b/dist/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	typings := string(b)
	for schema, decided := range httpapi.SDKFields {
		var fields []string
		if strings.HasPrefix(schema, "GET ") {
			fields = queryFields(t, typings, strings.TrimPrefix(schema, "GET "))
		} else {
			fields = schemaFields(t, typings, schema)
		}
		for _, f := range fields {
			if _, ok := decided[f]; !ok {
				t.Errorf("%s.%s: the SDK sends it, and Cove has not decided what it does with it (httpapi.SDKFields)", schema, f)
			}
		}
		for f := range decided {
			if !slices.Contains(fields, f) {
				t.Errorf("%s.%s: httpapi.SDKFields decides about a field the SDK does not have", schema, f)
			}
		}
	}

	srv := testutil.StartServer(t, apiKey)
	const id = "inotasandbox00000000"
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/v2/sandboxes", `{"templateID":"base","mcp":{"github":{}}}`, "mcp"},
		{"POST", "/v2/sandboxes", `{"templateID":"base","network":{"httpsPorts":[8443]}}`, "network.httpsPorts"},
		{"POST", "/sandboxes/" + id + "/resume", `{"timeout":60,"autoPause":true}`, "autoPause"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("X-API-Key", apiKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Message string }
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, c.field+" is not supported") {
			t.Errorf("%s %s with %s: %d %s, want 400 naming it", c.method, c.path, c.field, resp.StatusCode, body)
		}
	}
	// Empty values carry nothing: the SDK may send them.
	req, _ := http.NewRequest("POST", srv.URL+"/v2/sandboxes", strings.NewReader(`{"templateID":"base","mcp":null,"iam":{},"network":{"egressProxy":null}}`))
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a create with empty mcp, iam and egressProxy: %d, want 201", resp.StatusCode)
	}
}

// schemaFields lists the properties of components.schemas[name] in the
// typings: the names at the block's first indent.
func schemaFields(t *testing.T, typings, name string) []string {
	t.Helper()
	start := strings.Index(typings, "\n    "+name+": {\n")
	if start < 0 {
		t.Fatalf("the SDK's typings have no schema %s", name)
	}
	return fieldsOf(typings[start+len(name)+8:], "      ", "    }")
}

// queryFields lists the query parameters of GET path in the typings.
func queryFields(t *testing.T, typings, path string) []string {
	t.Helper()
	start := strings.Index(typings, "\n  \""+path+"\": {\n")
	if start < 0 {
		t.Fatalf("the SDK's typings have no path %s", path)
	}
	rest := typings[start:]
	get := strings.Index(rest, "\n    get: {\n")
	q := strings.Index(rest[get:], "        query?: {\n")
	if get < 0 || q < 0 {
		t.Fatalf("the SDK's typings have no query of GET %s", path)
	}
	return fieldsOf(rest[get+q+len("        query?: {\n"):], "          ", "        }")
}

var property = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\??:`)

// fieldsOf lists the property names at indent in block, which ends at
// the first line starting with end.
func fieldsOf(block, indent, end string) []string {
	var out []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, end) {
			break
		}
		if rest, ok := strings.CutPrefix(line, indent); ok {
			if m := property.FindStringSubmatch(rest); m != nil {
				out = append(out, m[1])
			}
		}
	}
	return out
}
