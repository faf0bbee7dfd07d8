package security_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// The tenants suite: two real teams, each with its own key, against one
// real server. Team "default" holds apiKey; team "other" holds otherKey.

// twoTeams starts a server whose data directory has the second team's key.
func twoTeams(t *testing.T, extra ...string) *coveProc {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddAPIKey(context.Background(), store.APIKey{Hash: auth.HashAPIKey(otherKey), Team: "other", Name: "test", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	return newCove(t, dir, extra...)
}

// apiJSON makes one API call as key and decodes a 2xx answer into out.
func apiJSON(t *testing.T, p *coveProc, key, method, path string, in, out any) int {
	t.Helper()
	var body *bytes.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	} else {
		body = bytes.NewReader(nil)
	}
	code, raw := call(t, method, p.srv.URL+path, body, "X-API-Key", key, "Content-Type", "application/json")
	if code < 300 && out != nil {
		if err := json.Unmarshal([]byte(raw), out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	if code >= 300 {
		t.Logf("%s %s: %d %s", method, path, code, raw)
	}
	return code
}

// tarOf is a tar of one file.
func tarOf(t *testing.T, name, body string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	return buf.Bytes()
}

// TestTenantFiles: the files a team's build copies are the files it
// uploaded. Another team that names the same hash — before or after —
// neither learns that it was uploaded, nor replaces it, nor gets it into
// the step cache; upload links are bound to their team and expire.
func TestTenantFiles(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0")
	hash := strings.Repeat("5e", 32) // the client names it; the server hashes the bytes itself
	type created struct {
		TemplateID string `json:"templateID"`
		BuildID    string `json:"buildID"`
	}
	type link struct {
		Present bool   `json:"present"`
		URL     string `json:"url"`
	}
	newTemplate := func(key, name string) created {
		var c created
		if code := apiJSON(t, p, key, "POST", "/v3/templates", map[string]any{"name": name, "cpuCount": 1, "memoryMB": 256}, &c); code != 202 {
			t.Fatalf("create template %s: %d", name, code)
		}
		return c
	}
	ask := func(key string, c created) link {
		var l link
		if code := apiJSON(t, p, key, "GET", "/templates/"+c.TemplateID+"/files/"+hash, nil, &l); code != 201 {
			t.Fatalf("files link: %d", code)
		}
		return l
	}
	put := func(u string, data []byte) int {
		code, raw := call(t, "PUT", u, bytes.NewReader(data))
		if code >= 300 {
			t.Logf("PUT %s: %d %s", u, code, raw)
		}
		return code
	}
	build := func(key string, c created) {
		start := map[string]any{"steps": []map[string]any{{"type": "COPY", "args": []string{"app.txt", "/srv/", "", ""}, "filesHash": hash}}}
		if code := apiJSON(t, p, key, "POST", "/v2/templates/"+c.TemplateID+"/builds/"+c.BuildID, start, nil); code != 202 {
			t.Fatalf("start build: %d", code)
		}
		testkit.Eventually(t, 2*time.Minute, func() error {
			var st struct{ Status string }
			apiJSON(t, p, key, "GET", "/templates/"+c.TemplateID+"/builds/"+c.BuildID+"/status", nil, &st)
			switch st.Status {
			case "ready":
				return nil
			case "error":
				t.Fatalf("build of %s failed", c.TemplateID)
			}
			return fmt.Errorf("the build of %s is %q", c.TemplateID, st.Status)
		})
	}
	contents := func(key, tpl string) string {
		c, err := cove.NewClient(cove.WithAPIURL(p.srv.URL), cove.WithSandboxURL(p.srv.URL), cove.WithAPIKey(key))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		sb, err := c.Create(ctx, cove.CreateOptions{Template: tpl})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Kill(ctx)
		return mustRun(t, ctx, sb, "root", "cat /srv/app.txt").out
	}

	// Team other plants its archive under the hash first.
	evil := newTemplate(otherKey, "planted")
	if l := ask(otherKey, evil); l.Present || l.URL == "" {
		t.Fatalf("team other's first ask: %+v", l)
	} else if code := put(l.URL, tarOf(t, "app.txt", "planted by other\n")); code != 200 {
		t.Fatalf("team other's upload: %d", code)
	}
	build(otherKey, evil)

	// Team default is not told of it, and builds with its own files.
	mine := newTemplate(apiKey, "mine")
	l := ask(apiKey, mine)
	if l.Present {
		t.Fatal("another team's upload answers present for this team's hash")
	}
	u, err := url.Parse(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, tc := range []struct {
		name string
		edit func(url.Values)
	}{
		{"the link made out to another team", func(v url.Values) { v.Set("team", "other") }},
		{"a later expiry", func(v url.Values) { v.Set("expires", fmt.Sprint(time.Now().Add(time.Hour).Unix())) }},
		{"no token", func(v url.Values) { v.Del("token") }},
	} {
		v := url.Values{}
		for k, vs := range q {
			v[k] = append([]string(nil), vs...)
		}
		tc.edit(v)
		bad := *u
		bad.RawQuery = v.Encode()
		if code := put(bad.String(), tarOf(t, "app.txt", "forged\n")); code != 401 {
			t.Errorf("upload through %s: %d, want 401", tc.name, code)
		}
	}
	if code := put(l.URL, tarOf(t, "app.txt", "team default's own\n")); code != 200 {
		t.Fatalf("team default's upload: %d", code)
	}
	// Team other uploads under the same hash again, through a fresh link of
	// its own template: the answer is its own binding, never a replacement.
	if l := ask(otherKey, evil); !l.Present {
		t.Error("team other's own upload is not present to it")
	}
	evil2 := newTemplate(otherKey, "planted-again")
	if l := ask(otherKey, evil2); !l.Present {
		t.Error("team other's own upload is not present to its second template")
	}
	build(apiKey, mine)
	if got := contents(apiKey, "mine"); got != "team default's own\n" {
		t.Errorf("team default's sandbox has /srv/app.txt = %q, want its own upload", got)
	}
	if got := contents(otherKey, "planted"); got != "planted by other\n" {
		t.Errorf("team other's sandbox has /srv/app.txt = %q, want its own upload", got)
	}
}

// TestWakeNeedsCredential: traffic without the sandbox's credential — its
// agent's access token, its ports' traffic token — does not resume a
// paused auto-resume sandbox; traffic with it does.
func TestWakeNeedsCredential(t *testing.T) {
	p := newCove(t, "", "--network=false", "--pool-size", "0")
	var m struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
		Traffic         string `json:"trafficAccessToken"`
	}
	body := map[string]any{"timeout": 600, "secure": true, "autoPause": true, "autoResume": map[string]any{"enabled": true},
		"network": map[string]any{"allowPublicTraffic": false}}
	if code := apiJSON(t, p, apiKey, "POST", "/v2/sandboxes", body, &m); code != 201 || m.Traffic == "" || m.EnvdAccessToken == "" {
		t.Fatalf("create: %d %+v", code, m)
	}
	ctx := context.Background()
	sb, err := client(t, p.srv).Connect(ctx, m.SandboxID, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Commands.Start(ctx, "python3 -m http.server 8080 -d /tmp"); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, ctx, sb, "user", "for i in $(seq 100); do curl -s -o /dev/null localhost:8080/ && echo up && break; sleep 0.05; done"); r.out != "up\n" {
		t.Fatalf("the web server did not start: %q", r.out)
	}
	state := func() string {
		var info struct{ State string }
		apiJSON(t, p, apiKey, "GET", "/sandboxes/"+m.SandboxID, nil, &info)
		return info.State
	}
	pause := func() {
		if code := apiJSON(t, p, apiKey, "POST", "/sandboxes/"+m.SandboxID+"/pause", map[string]any{}, nil); code != 204 {
			t.Fatalf("pause: %d", code)
		}
	}
	pause()
	u := p.srv.URL
	agent := []string{"E2b-Sandbox-Id", m.SandboxID, "Content-Type", "application/json", "Connect-Protocol-Version", "1"}
	port := []string{"E2b-Sandbox-Id", m.SandboxID, "E2b-Sandbox-Port", "8080"}
	for _, tc := range []struct {
		name, method, path string
		headers            []string
		want               int
	}{
		{"the agent without a token", "POST", "/process.Process/List", agent, 401},
		{"the agent with the traffic token", "POST", "/process.Process/List", append(agent, "X-Access-Token", m.Traffic), 401},
		{"the agent's health", "GET", "/health", agent, 401},
		{"a file without a signature", "GET", "/files?path=/tmp/x&username=user", agent, 401},
		{"the port without a token", "GET", "/", port, 403},
		{"the port with the access token", "GET", "/", append(port, "E2b-Traffic-Access-Token", m.EnvdAccessToken), 403},
		{"the port by host name", "GET", "/", []string{"Host", "8080-" + m.SandboxID + ".localhost"}, 403},
	} {
		code, raw := call(t, tc.method, u+tc.path, strings.NewReader("{}"), tc.headers...)
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, raw, tc.want)
		}
		if s := state(); s != "paused" {
			t.Fatalf("%s woke the sandbox: it is %s", tc.name, s)
		}
	}
	for _, tc := range []struct {
		name    string
		path    string
		headers []string
	}{
		{"the agent with its token", "/process.Process/List", append(agent, "X-Access-Token", m.EnvdAccessToken)},
		{"the port with its token", "/", append(port, "E2b-Traffic-Access-Token", m.Traffic)},
	} {
		method := map[bool]string{true: "POST", false: "GET"}[strings.HasPrefix(tc.path, "/process")]
		code, raw := call(t, method, u+tc.path, strings.NewReader("{}"), tc.headers...)
		if code != 200 || state() != "running" {
			t.Errorf("%s: %d %s, sandbox %s; want 200 and running", tc.name, code, raw, state())
		}
		pause()
	}
}

// TestTenantNames: template and snapshot names are a team's own. Another
// team's name answers 404 (never 403, which would tell that it exists),
// and a team may take it for its own; built-in names stay everyone's and
// no team's to take.
func TestTenantNames(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0")
	type created struct {
		TemplateID string `json:"templateID"`
	}
	snapshot := func(key, name string) {
		var sb struct {
			SandboxID string `json:"sandboxID"`
		}
		if code := apiJSON(t, p, key, "POST", "/v2/sandboxes", map[string]any{"timeout": 120}, &sb); code != 201 {
			t.Fatalf("create: %d", code)
		}
		defer apiJSON(t, p, key, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
		if code := apiJSON(t, p, key, "POST", "/sandboxes/"+sb.SandboxID+"/snapshots", map[string]any{"name": name}, nil); code != 201 {
			t.Fatalf("snapshot %s: %d", name, code)
		}
	}
	alias := func(key, name string) string {
		var got created
		if code := apiJSON(t, p, key, "GET", "/templates/aliases/"+name, nil, &got); code != 200 {
			t.Fatalf("alias %s: %d", name, code)
		}
		return got.TemplateID
	}
	var theirs created
	if code := apiJSON(t, p, otherKey, "POST", "/v3/templates", map[string]any{"name": "squatted"}, &theirs); code != 202 {
		t.Fatalf("team other's template: %d", code)
	}
	snapshot(otherKey, "snap")
	theirSnap := alias(otherKey, "snap")
	for _, tc := range []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"another team's template name", "GET", "/templates/aliases/squatted", nil, 404},
		{"another team's snapshot name", "GET", "/templates/aliases/snap", nil, 404},
		{"another team's template by id", "GET", "/templates/" + theirs.TemplateID, nil, 404},
		{"a sandbox of another team's snapshot", "POST", "/v2/sandboxes", map[string]any{"templateID": "snap"}, 404},
		{"a sandbox of another team's snapshot by id", "POST", "/v2/sandboxes", map[string]any{"templateID": theirSnap}, 404},
		{"a built-in name", "POST", "/v3/templates", map[string]any{"name": "base"}, 400},
		{"a built-in alias", "GET", "/templates/aliases/base", nil, 200},
	} {
		if code := apiJSON(t, p, apiKey, tc.method, tc.path, tc.body, nil); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	// The names are free for this team, and stay the other's too.
	var mine created
	if code := apiJSON(t, p, apiKey, "POST", "/v3/templates", map[string]any{"name": "squatted"}, &mine); code != 202 || mine.TemplateID == theirs.TemplateID {
		t.Fatalf("this team's template of the name: %d %+v", code, mine)
	}
	snapshot(apiKey, "snap")
	if mySnap := alias(apiKey, "snap"); mySnap == theirSnap {
		t.Errorf("both teams' snapshots named snap are %s", mySnap)
	}
	for _, tc := range []struct{ key, alias, want string }{
		{apiKey, "squatted", mine.TemplateID}, {otherKey, "squatted", theirs.TemplateID}, {otherKey, "snap", theirSnap},
	} {
		if got := alias(tc.key, tc.alias); got != tc.want {
			t.Errorf("alias %s: %s, want %s", tc.alias, got, tc.want)
		}
	}
}

// adminToken is the operator's token of the servers the tenants suite
// starts with it.
const adminToken = "cove-admin-token-0123456789abcdef0123456789"

// TestCrossTeamMatrix: for every endpoint that takes an id or a name,
// team other on team default's object answers 404 (401 where a token,
// not a team, is the credential: a volume's content), and changes
// nothing: afterwards team default's objects are as they were.
func TestCrossTeamMatrix(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--admin-token", adminToken)
	ctx := context.Background()
	// Team default's objects: a sandbox, a template, a snapshot, a volume
	// with a file, and its key.
	c := client(t, p.srv)
	tpl, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "a-tpl", Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"OWNER", "a"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sb struct {
		SandboxID string `json:"sandboxID"`
		State     string `json:"state"`
		EndAt     string `json:"endAt"`
	}
	if code := apiJSON(t, p, apiKey, "POST", "/v2/sandboxes", map[string]any{"templateID": "a-tpl", "timeout": 600}, &sb); code != 201 {
		t.Fatalf("create: %d", code)
	}
	id := sb.SandboxID
	apiJSON(t, p, apiKey, "GET", "/sandboxes/"+id, nil, &sb)
	if code := apiJSON(t, p, apiKey, "POST", "/sandboxes/"+id+"/snapshots", map[string]any{"name": "a-snap"}, nil); code != 201 {
		t.Fatalf("snapshot: %d", code)
	}
	var snap struct {
		TemplateID string `json:"templateID"`
	}
	apiJSON(t, p, apiKey, "GET", "/templates/aliases/a-snap", nil, &snap)
	var vol struct {
		VolumeID string `json:"volumeID"`
		Token    string `json:"token"`
	}
	if code := apiJSON(t, p, apiKey, "POST", "/volumes", map[string]any{"name": "a-vol"}, &vol); code != 201 {
		t.Fatalf("volume: %d", code)
	}
	t.Cleanup(func() { // before the server stops: a volume stays mounted until deleted
		apiJSON(t, p, apiKey, "DELETE", "/volumes/a-vol", nil, nil)
		apiJSON(t, p, otherKey, "DELETE", "/volumes/b-vol", nil, nil)
	})
	var keys []struct {
		ID string `json:"id"`
	}
	asAdmin := func(team, method, path string, body any) (int, string) {
		b, _ := json.Marshal(body)
		return call(t, method, p.srv.URL+path, bytes.NewReader(b), "X-Admin-Token", adminToken, "X-Team-ID", team, "Content-Type", "application/json")
	}
	if code, raw := asAdmin("default", "GET", "/api-keys", nil); code != 200 || json.Unmarshal([]byte(raw), &keys) != nil || len(keys) != 1 {
		t.Fatalf("team default's keys: %d %s", code, raw)
	}
	hash := strings.Repeat("ab", 32)
	build := tpl.BuildID
	for _, tc := range []struct{ method, path string }{
		{"GET", "/sandboxes/" + id},
		{"DELETE", "/sandboxes/" + id},
		{"POST", "/sandboxes/" + id + "/timeout"},
		{"POST", "/sandboxes/" + id + "/refreshes"},
		{"POST", "/sandboxes/" + id + "/pause"},
		{"POST", "/sandboxes/" + id + "/resume"},
		{"POST", "/sandboxes/" + id + "/connect"},
		{"POST", "/v2/sandboxes/" + id + "/connect"},
		{"GET", "/sandboxes/" + id + "/metrics"},
		{"GET", "/sandboxes/" + id + "/logs"},
		{"GET", "/v2/sandboxes/" + id + "/logs"},
		{"PUT", "/sandboxes/" + id + "/network"},
		{"POST", "/sandboxes/" + id + "/snapshots"},
		{"POST", "/sandboxes/" + id + "/fork"},
		{"GET", "/templates/" + tpl.TemplateID},
		{"GET", "/templates/a-tpl"},
		{"GET", "/templates/" + tpl.TemplateID + "/tags"},
		{"GET", "/templates/aliases/a-tpl"},
		{"GET", "/templates/" + tpl.TemplateID + "/files/" + hash},
		{"POST", "/v2/templates/" + tpl.TemplateID + "/builds/" + build},
		{"GET", "/templates/" + tpl.TemplateID + "/builds/" + build + "/status"},
		{"DELETE", "/templates/" + tpl.TemplateID},
		{"DELETE", "/templates/a-tpl"},
		{"GET", "/templates/" + snap.TemplateID},
		{"GET", "/templates/aliases/a-snap"},
		{"DELETE", "/templates/" + snap.TemplateID},
		{"DELETE", "/templates/a-snap"},
		{"GET", "/volumes/" + vol.VolumeID},
		{"GET", "/volumes/a-vol"},
		{"DELETE", "/volumes/" + vol.VolumeID},
		{"DELETE", "/volumes/a-vol"},
	} {
		body := map[string]any{"timeout": 60}
		if code := apiJSON(t, p, otherKey, tc.method, tc.path, body, nil); code != 404 {
			t.Errorf("team other: %s %s: %d, want 404", tc.method, tc.path, code)
		}
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"tag another team's template", "POST", "/templates/tags", map[string]any{"target": "a-tpl:default", "tags": []string{"stolen"}}},
		{"untag another team's template", "DELETE", "/templates/tags", map[string]any{"name": "a-tpl", "tags": []string{"default"}}},
		{"a sandbox of another team's template", "POST", "/v2/sandboxes", map[string]any{"templateID": tpl.TemplateID}},
		{"a sandbox of another team's snapshot", "POST", "/v2/sandboxes", map[string]any{"templateID": snap.TemplateID}},
		{"a build from another team's template", "POST", "/v3/templates", nil},
	} {
		if tc.body == nil { // a template of its own, built from the other's
			var mine struct{ TemplateID, BuildID string }
			apiJSON(t, p, otherKey, "POST", "/v3/templates", map[string]any{"name": "b-tpl"}, &mine)
			tc.method, tc.path, tc.body = "POST", "/v2/templates/"+mine.TemplateID+"/builds/"+mine.BuildID, map[string]any{"fromTemplate": tpl.TemplateID}
		}
		if code := apiJSON(t, p, otherKey, tc.method, tc.path, tc.body, nil); code != 404 {
			t.Errorf("team other: %s: %d, want 404", tc.name, code)
		}
	}
	// Keys, as the operator acting for team other.
	for _, method := range []string{"PATCH", "DELETE"} {
		if code, raw := asAdmin("other", method, "/api-keys/"+keys[0].ID, map[string]any{"name": "stolen"}); code != 404 {
			t.Errorf("team other: %s team default's key: %d %s, want 404", method, code, raw)
		}
	}
	// A volume's content: its token is the credential; the other team's
	// key, or its own volume's token, is not.
	var theirs struct {
		Token string `json:"token"`
	}
	apiJSON(t, p, otherKey, "POST", "/volumes", map[string]any{"name": "b-vol"}, &theirs)
	for _, auth := range [][]string{{"X-API-Key", otherKey}, {"Authorization", "Bearer " + theirs.Token}} {
		if code, raw := call(t, "GET", p.srv.URL+"/volumecontent/"+vol.VolumeID+"/dir?path=/", nil, auth...); code != 401 {
			t.Errorf("another team's volume content with %s: %d %s, want 401", auth[0], code, raw)
		}
	}
	// Nothing changed.
	var after struct {
		State string `json:"state"`
		EndAt string `json:"endAt"`
	}
	if code := apiJSON(t, p, apiKey, "GET", "/sandboxes/"+id, nil, &after); code != 200 || after.State != "running" || after.EndAt != sb.EndAt || sb.EndAt == "" {
		t.Errorf("team default's sandbox after the matrix: %d %+v, was %+v", code, after, sb)
	}
	for _, path := range []string{"/templates/aliases/a-tpl", "/templates/aliases/a-snap", "/volumes/" + vol.VolumeID} {
		if code := apiJSON(t, p, apiKey, "GET", path, nil, nil); code != 200 {
			t.Errorf("team default's %s after the matrix: %d", path, code)
		}
	}
	var tags []struct{ Tag string }
	apiJSON(t, p, apiKey, "GET", "/templates/"+tpl.TemplateID+"/tags", nil, &tags)
	if len(tags) != 1 || tags[0].Tag != "default" {
		t.Errorf("team default's template's tags after the matrix: %+v", tags)
	}
	if code, raw := asAdmin("default", "GET", "/api-keys", nil); code != 200 || !strings.Contains(raw, keys[0].ID) || strings.Contains(raw, "stolen") {
		t.Errorf("team default's keys after the matrix: %d %s", code, raw)
	}
	if code := apiJSON(t, p, otherKey, "GET", "/sandboxes/metrics?sandbox_ids="+id, nil, nil); code != 200 {
		t.Errorf("metrics of another team's sandbox by list: %d", code)
	}
	apiJSON(t, p, apiKey, "DELETE", "/sandboxes/"+id, nil, nil)
}

// TestKeyAPI: E2B's key API (GET/POST /api-keys, PATCH/DELETE
// /api-keys/{id}) for the operator's admin token naming a team, and for
// the dashboard's session of a team; a team's API key may not manage keys.
// GET /teams answers the caller's team.
func TestKeyAPI(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--admin-token", adminToken)
	u := p.srv.URL
	admin := func(team, method, path, body string) (int, string) {
		return call(t, method, u+path, strings.NewReader(body), "X-Admin-Token", adminToken, "X-Team-ID", team, "Content-Type", "application/json")
	}
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"a team's API key", []string{"X-API-Key", otherKey}, 403},
		{"a wrong admin token", []string{"X-Admin-Token", adminToken + "x", "X-Team-ID", "other"}, 401},
		{"the admin token without a team", []string{"X-Admin-Token", adminToken}, 400},
		{"the admin token naming no team", []string{"X-Admin-Token", adminToken, "X-Team-ID", "nope"}, 404},
	} {
		if code, raw := call(t, "GET", u+"/api-keys", nil, tc.headers...); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, raw, tc.want)
		}
	}
	// Made by the operator for team other: shown once, masked after.
	code, raw := admin("other", "POST", "/api-keys", `{"name":"ci"}`)
	var made struct {
		ID   string `json:"id"`
		Key  string `json:"key"`
		Name string `json:"name"`
		Mask struct {
			Prefix            string `json:"prefix"`
			MaskedValuePrefix string `json:"maskedValuePrefix"`
			MaskedValueSuffix string `json:"maskedValueSuffix"`
		} `json:"mask"`
	}
	if code != 201 || json.Unmarshal([]byte(raw), &made) != nil || !regexp.MustCompile(`^e2b_[0-9a-f]{40}$`).MatchString(made.Key) || made.Name != "ci" {
		t.Fatalf("create a key: %d %s", code, raw)
	}
	if made.Mask.Prefix != "e2b_" || made.Mask.MaskedValuePrefix != made.Key[4:6] || made.Mask.MaskedValueSuffix != made.Key[40:] {
		t.Errorf("the new key's mask: %+v of %s", made.Mask, made.Key)
	}
	if code := apiJSON(t, p, made.Key, "GET", "/v2/sandboxes", nil, nil); code != 200 {
		t.Fatalf("the new key: %d", code)
	}
	var teams []struct {
		TeamID, Name, APIKey string
		IsDefault            bool
	}
	if code := apiJSON(t, p, made.Key, "GET", "/teams", nil, &teams); code != 200 || len(teams) != 1 || teams[0].TeamID != "other" || teams[0].APIKey != made.Key || !teams[0].IsDefault {
		t.Errorf("GET /teams: %d %+v", code, teams)
	}
	// Its last use shows (written in the background).
	testkit.Eventually(t, 10*time.Second, func() error {
		_, raw := admin("other", "GET", "/api-keys", "")
		if strings.Contains(raw, `"lastUsed":"`) {
			return nil
		}
		return fmt.Errorf("no key's last use shows: %s", raw)
	})
	if code, raw := admin("other", "PATCH", "/api-keys/"+made.ID, `{"name":"deploy"}`); code != 200 || !strings.Contains(raw, `"name":"deploy"`) {
		t.Errorf("rename: %d %s", code, raw)
	}
	if code, raw := admin("other", "GET", "/api-keys", ""); code != 200 || !strings.Contains(raw, `"deploy"`) || strings.Contains(raw, made.Key) {
		t.Errorf("list: %d %s", code, raw)
	}
	if code, raw := admin("other", "DELETE", "/api-keys/"+made.ID, ""); code != 204 {
		t.Errorf("revoke: %d %s", code, raw)
	}
	if code := apiJSON(t, p, made.Key, "GET", "/v2/sandboxes", nil, nil); code != 401 {
		t.Errorf("a revoked key: %d, want 401", code)
	}
	var keys []struct{ ID string }
	_, raw = admin("other", "GET", "/api-keys", "")
	if json.Unmarshal([]byte(raw), &keys) != nil || len(keys) != 1 {
		t.Fatalf("team other's keys: %s", raw)
	}
	if code, raw := admin("other", "DELETE", "/api-keys/"+keys[0].ID, ""); code != 409 || !strings.Contains(raw, "last API key") {
		t.Errorf("revoke a team's last key: %d %s, want 409 saying so", code, raw)
	}
	// The dashboard's session of team default manages team default's keys.
	resp, err := http.Post(u+"/dashboard/login", "application/json", strings.NewReader(`{"apiKey":"`+apiKey+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var session struct{ CSRF string } // the page's token, sent with every request
	err = json.NewDecoder(resp.Body).Decode(&session)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Cookies()) == 0 || err != nil {
		t.Fatalf("dashboard login: %d, cookies %v, %v", resp.StatusCode, resp.Cookies(), err)
	}
	jar := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	if code, raw := call(t, "GET", u+"/dashboard/api/e2b/api-keys", nil, "Cookie", jar, "X-Cove-CSRF", session.CSRF); code != 200 || strings.Count(raw, `"id"`) != 1 {
		t.Errorf("the dashboard's session lists its team's keys: %d %s", code, raw)
	}
}

// TestListensWhereTold: the server listens on its listen address and, for
// the egress proxy, on the gateways of sandboxes with domain rules — on
// no wildcard address and nowhere else, IPv6 included.
func TestListensWhereTold(t *testing.T) {
	const netRange = "198.19.254.0/24"
	p := newCove(t, "", "--network=true", "--network-range", netRange, "--pool-size", "1", "--egress-nameserver", "127.0.0.1:9") // no look-up made
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	body := map[string]any{"timeout": 120, "network": map[string]any{"allowOut": []string{"allowed.test"}, "denyOut": []string{"0.0.0.0/0"}}}
	if code := apiJSON(t, p, apiKey, "POST", "/v2/sandboxes", body, &sb); code != 201 {
		t.Fatalf("create with domain rules: %d", code)
	}
	defer apiJSON(t, p, apiKey, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
	inRange := netip.MustParsePrefix(netRange)
	var gateways int
	for _, l := range listeners(t, p.cmd.Process.Pid) {
		switch {
		case l.String() == p.srv.Addr:
		case l.Addr().Is4() && inRange.Contains(l.Addr()) && l.Addr().As4()[3]%4 == 1: // a slot's gateway
			gateways++
		default:
			t.Errorf("the server listens at %s", l)
		}
	}
	if gateways != 1 {
		t.Errorf("the egress proxy listens at %d gateways, want 1 (the sandbox with domain rules)", gateways)
	}
}

// listeners are the TCP addresses pid listens at (IPv4 and IPv6).
func listeners(t *testing.T, pid int) []netip.AddrPort {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []netip.AddrPort
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			hexAddr, hexPort, _ := strings.Cut(f[1], ":")
			raw, err := hex.DecodeString(hexAddr)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+4 <= len(raw); i += 4 { // each 32-bit word is little-endian
				raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
			}
			addr, _ := netip.AddrFromSlice(raw)
			port, _ := strconv.ParseUint(hexPort, 16, 16)
			out = append(out, netip.AddrPortFrom(addr.Unmap(), uint16(port)))
		}
	}
	return out
}

// TestBearerAuth: E2B's SDKs from 2.64 may send Authorization: Bearer
// with X-Team-ID where they sent an API key. Cove takes a team's API key
// for its own team only, and the operator's admin token for any; without
// X-Team-ID, with another team's id or name, or with a token it does not
// know, the request is 401, and nothing of the other team's is touched.
func TestBearerAuth(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--admin-token", adminToken)
	get := func(headers ...string) int {
		code, _ := call(t, "GET", p.srv.URL+"/v2/sandboxes", bytes.NewReader(nil), headers...)
		return code
	}
	for _, c := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"the team's key, its id", []string{"Authorization", "Bearer " + apiKey, "X-Team-ID", "default"}, 200},
		{"the scheme in lower case", []string{"Authorization", "bearer " + otherKey, "X-Team-ID", "other"}, 200},
		{"the admin token, any team", []string{"Authorization", "Bearer " + adminToken, "X-Team-ID", "other"}, 200},
		{"no X-Team-ID", []string{"Authorization", "Bearer " + apiKey}, 401},
		{"another team's id", []string{"Authorization", "Bearer " + otherKey, "X-Team-ID", "default"}, 401},
		{"a team that does not exist", []string{"Authorization", "Bearer " + apiKey, "X-Team-ID", "nobody"}, 401},
		{"an unknown token", []string{"Authorization", "Bearer e2b_" + strings.Repeat("9", 40), "X-Team-ID", "default"}, 401},
		{"another scheme", []string{"Authorization", "Basic " + apiKey, "X-Team-ID", "default"}, 401},
	} {
		if got := get(c.headers...); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	// A bearer key acts as the key: it cannot manage keys.
	if code, _ := call(t, "GET", p.srv.URL+"/api-keys", bytes.NewReader(nil), "Authorization", "Bearer "+apiKey, "X-Team-ID", "default"); code != 403 {
		t.Errorf("keys through a bearer API key: %d, want 403", code)
	}
	// The sandbox it creates is its team's.
	code, raw := call(t, "POST", p.srv.URL+"/v2/sandboxes", strings.NewReader(`{"templateID":"base","timeout":60}`),
		"Authorization", "Bearer "+otherKey, "X-Team-ID", "other", "Content-Type", "application/json")
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	if code != 201 || json.Unmarshal([]byte(raw), &sb) != nil {
		t.Fatalf("a create with a bearer key: %d %s", code, raw)
	}
	if code := apiJSON(t, p, apiKey, "GET", "/sandboxes/"+sb.SandboxID, nil, nil); code != 404 {
		t.Errorf("the other team's sandbox, to team default: %d, want 404", code)
	}
	if code := apiJSON(t, p, otherKey, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil); code != 204 {
		t.Errorf("kill: %d", code)
	}
}
