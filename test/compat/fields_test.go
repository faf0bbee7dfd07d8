package compat

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
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
// SDK has; holds the compatibility table of docs/GUIDE.md to it and to
// the SDK packages installed (compatibilityTable); then sends each
// refused field to a real server, which must answer 400 naming it.
func TestSDKRequestFields(t *testing.T) {
	npmInstall(t)
	compatibilityTable(t)
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
	// A served field the server cannot apply is refused too, never ignored:
	// this server gives sandboxes no network (--network=false), so no
	// resolvers of their own.
	req, _ := http.NewRequest("POST", srv.URL+"/v2/sandboxes", strings.NewReader(`{"templateID":"base","network":{"dnsServers":["203.0.113.53"]}}`))
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "dnsServers") {
		t.Errorf("dnsServers on a server without sandbox networks: %d %s, want 501 naming it", resp.StatusCode, body)
	}
	// Empty values carry nothing: the SDK may send them.
	req, _ = http.NewRequest("POST", srv.URL+"/v2/sandboxes", strings.NewReader(`{"templateID":"base","mcp":null,"iam":{},"network":{"egressProxy":null}}`))
	req.Header.Set("X-API-Key", apiKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a create with empty mcp, iam and egressProxy: %d, want 201", resp.StatusCode)
	}
}

// compatibilityTable holds the tables of GUIDE.md's "Compatibility with
// E2B's SDKs" true: each official SDK package installed here (npm e2b and
// @e2b/*, PyPI e2b*) is a row with its installed version, pinned as
// installed; each field a row decides is decided so in httpapi.SDKFields,
// and every field SDKFields decides has its row; a refused one says why.
func compatibilityTable(t *testing.T) {
	t.Helper()
	guide, err := os.ReadFile("../../docs/GUIDE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(guide)

	want := map[string]string{} // "registry package" → version installed
	var pkg struct{ Dependencies map[string]string }
	readJSON(t, "package.json", &pkg)
	for name, pin := range pkg.Dependencies {
		if name != "e2b" && !strings.HasPrefix(name, "@e2b/") {
			continue
		}
		var installed struct{ Version string }
		readJSON(t, filepath.Join("node_modules", name, "package.json"), &installed)
		if installed.Version != pin {
			t.Errorf("npm %s: %s installed, %s pinned in package.json", name, installed.Version, pin)
		}
		want["npm "+name] = installed.Version
	}
	reqs, err := os.ReadFile("py/requirements.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(reqs), "\n") {
		name, pin, ok := strings.Cut(strings.TrimSpace(line), "==")
		// e2b-dockerfile-utils is the SDK's own helper, not a package users install.
		if !ok || !strings.HasPrefix(name, "e2b") || name == "e2b-dockerfile-utils" {
			continue
		}
		dist, _ := filepath.Glob("py/.venv/lib/python3*/site-packages/" + strings.ReplaceAll(name, "-", "_") + "-*.dist-info")
		if len(dist) != 1 || !strings.HasSuffix(dist[0], "-"+pin+".dist-info") {
			t.Errorf("PyPI %s: installed %v, %s pinned in requirements.txt", name, dist, pin)
		}
		want["PyPI "+name] = pin
	}
	got := map[string]string{}
	for _, row := range docTable(t, doc, "sdks") {
		got[row[1]+" "+strings.Trim(row[0], "`")] = row[2]
	}
	if !maps.Equal(got, want) {
		t.Errorf("GUIDE.md's SDK packages are %v; make test runs %v", got, want)
	}

	decided := map[string]map[string]httpapi.FieldUse{}
	for _, row := range docTable(t, doc, "fields") {
		use := httpapi.Served
		if reason, ok := strings.CutPrefix(row[3], "refused"); ok {
			use = httpapi.Refused
			if len(strings.TrimSpace(strings.TrimPrefix(reason, ":"))) < 10 {
				t.Errorf("GUIDE.md: %s refuses %s without saying why", row[1], row[2])
			}
		} else if !strings.HasPrefix(row[3], "served") {
			t.Errorf("GUIDE.md: %s %s is %q, want served or refused: why", row[1], row[2], row[3])
		}
		for _, schema := range ticked(row[1]) {
			for _, f := range ticked(row[2]) {
				if decided[schema] == nil {
					decided[schema] = map[string]httpapi.FieldUse{}
				}
				if _, twice := decided[schema][f]; twice {
					t.Errorf("GUIDE.md: %s.%s has two rows", schema, f)
				}
				decided[schema][f] = use
			}
		}
	}
	for schema, fields := range httpapi.SDKFields {
		for f, use := range fields {
			if got, ok := decided[schema][f]; !ok || got != use {
				t.Errorf("%s.%s: httpapi.SDKFields says %s, GUIDE.md's table %q", schema, f, use, got)
			}
		}
	}
	for schema, fields := range decided {
		for f := range fields {
			if _, ok := httpapi.SDKFields[schema][f]; !ok {
				t.Errorf("%s.%s: GUIDE.md's table decides it, httpapi.SDKFields does not", schema, f)
			}
		}
	}
}

// docTable is the rows (cells trimmed, header and rule left out) of the
// table after the marker <!-- compat:name --> in doc.
func docTable(t *testing.T, doc, name string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- compat:"+name+" -->\n")
	if !ok {
		t.Fatalf("GUIDE.md has no table marked compat:%s", name)
	}
	var rows [][]string
	for i, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("GUIDE.md's table compat:%s is empty", name)
	}
	return rows
}

var tickedName = regexp.MustCompile("`([^`]+)`")

// ticked is the `quoted` names of a cell.
func ticked(cell string) []string {
	var out []string
	for _, m := range tickedName.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
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
