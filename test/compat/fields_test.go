package compat

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/httpapi"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestSDKRequestFields reads the official SDKs' schemas — the JS SDK's
// typings (e2b's API schemas) and the Python SDK's request models, read
// from the installed package — and fails on a field of a create,
// connect, resume, pause, snapshot, list or network request that
// httpapi.SDKFields does not decide about, or that it names and neither
// SDK has; then sends each refused field to a real server, which must
// answer 400 naming it.
func TestSDKRequestFields(t *testing.T) {
	npmInstall(t)
	b, err := os.ReadFile("node_modules/e2b/dist/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	typings := string(b)
	models := pythonModels(t)
	for schema, decided := range httpapi.SDKFields {
		var js []string
		if strings.HasPrefix(schema, "GET ") {
			js = queryFields(t, typings, strings.TrimPrefix(schema, "GET "))
		} else if strings.Contains(typings, "\n    "+schema+": {\n") {
			js = schemaFields(t, typings, schema)
		}
		py, inPython := pythonFields(t, models, schema)
		if js == nil && !inPython {
			t.Errorf("%s: neither SDK has this schema", schema)
		}
		for sdk, fields := range map[string][]string{"JS": js, "Python": py} {
			for _, f := range fields {
				if _, ok := decided[f]; !ok {
					t.Errorf("%s.%s: the %s SDK sends it, and Cove has not decided what it does with it (httpapi.SDKFields)", schema, f, sdk)
				}
			}
		}
		for f := range decided {
			newer, isNewer := httpapi.NewerSDKFields[schema][f]
			switch has := slices.Contains(js, f) || slices.Contains(py, f); {
			case !has && !isNewer:
				t.Errorf("%s.%s: httpapi.SDKFields decides about a field neither SDK has", schema, f)
			case has && isNewer:
				t.Errorf("%s.%s: an installed SDK has it now: it is no longer of the newer releases (%s; httpapi.NewerSDKFields)", schema, f, newer)
			}
		}
	}

	srv := testutil.StartServer(t, apiKey)
	const id = "inotasandbox00000000"
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/v2/sandboxes", `{"templateID":"base","mcp":{"github":{}}}`, "mcp"},
		{"POST", "/sandboxes/" + id + "/resume", `{"timeout":60,"autoPause":true}`, "autoPause"},
		{"POST", "/sandboxes/" + id + "/resume", `{"timeout":60,"cpuCount":2}`, "cpuCount"},
		{"POST", "/v2/sandboxes", `{"templateID":"base","network":{"dnsServers":["198.51.100.53"]}}`, "network.dnsServers"},
		{"PUT", "/sandboxes/" + id + "/network", `{"dnsServers":["198.51.100.53"]}`, "dnsServers"},
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

// pythonModels is the folder of the installed Python SDK's request
// models (e2b/api/client, generated from E2B's API).
func pythonModels(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("py/.venv/lib/python3*/site-packages/e2b/api/client")
	if len(dirs) != 1 {
		t.Fatalf("the Python SDK is not installed in py/.venv (%v): make deps installs it", dirs)
	}
	return dirs[0]
}

var (
	upperAfter   = regexp.MustCompile(`([a-z0-9])([A-Z])`)
	optionalKey  = regexp.MustCompile(`field_dict\["([A-Za-z_0-9]+)"\]`)
	requiredKey  = regexp.MustCompile(`(?m)^\s+"([A-Za-z_0-9]+)": [a-z_0-9]+,$`)
	queryParam   = regexp.MustCompile(`params\["([A-Za-z_0-9]+)"\]`)
	toDictMethod = regexp.MustCompile(`(?s)def to_dict\(self\).*?return field_dict`)
)

// pythonFields lists what the Python SDK sends of schema: the keys its
// model's to_dict writes, or a GET's query parameters; false when the
// SDK has no such model.
func pythonFields(t *testing.T, models, schema string) ([]string, bool) {
	t.Helper()
	var file string
	var keys []*regexp.Regexp
	if path, ok := strings.CutPrefix(schema, "GET "); ok {
		// GET /v2/sandboxes is api/sandboxes/get_v2_sandboxes.py.
		name := "get" + strings.NewReplacer("/", "_", "{", "", "}", "").Replace(path)
		file = filepath.Join(models, "api", "sandboxes", name+".py")
		keys = []*regexp.Regexp{queryParam}
	} else {
		file = filepath.Join(models, "models", strings.ToLower(upperAfter.ReplaceAllString(schema, "${1}_${2}"))+".py")
		keys = []*regexp.Regexp{optionalKey, requiredKey}
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if len(keys) == 2 {
		src = toDictMethod.FindString(src)
	}
	var out []string
	for _, re := range keys {
		for _, m := range re.FindAllStringSubmatch(src, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out, true
}
