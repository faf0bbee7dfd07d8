package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
)

// teamAPI answers with the team it is served for.
type teamAPI struct{}

func (teamAPI) ServeAs(team string, w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"team": team, "path": r.URL.Path, "cookie": r.Header.Get("Cookie")})
}

const testKey = "e2b_1111111111111111111111111111111111111111"

func newTest(t *testing.T) (*httptest.Server, store.Store) {
	t.Helper()
	return newTestWith(t, func(*Config) {})
}

// newTestWith is newTest with its Config edited.
func newTestWith(t *testing.T, edit func(*Config)) (*httptest.Server, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.AddAPIKey(context.Background(), store.APIKey{Hash: auth.HashAPIKey(testKey), Team: "t1", Name: "k", CreatedAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st, API: teamAPI{}, Log: slog.New(slog.DiscardHandler),
		Nodes: func(context.Context) ([]NodeStatus, error) { return nil, nil }}
	edit(&cfg)
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return httptest.NewServer(h), st
}

// TestSessionCookieOverTLS: over HTTPS the session is a __Host- cookie
// (Secure, path /, no Domain), which a page on a sibling host — a
// sandbox's {port}-{id}.<domain> — cannot set; a cove_session cookie, even
// one holding a valid session, is not read there.
func TestSessionCookieOverTLS(t *testing.T) {
	plain, _ := newTest(t)
	plain.Close()
	srv := httptest.NewUnstartedServer(plain.Config.Handler)
	srv.StartTLS()
	defer srv.Close()
	send := func(method, path, body string, headers ...string) (*http.Response, string) {
		req, _ := http.NewRequest(method, srv.URL+Prefix+path, strings.NewReader(body))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := srv.Client().Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := send("POST", "/login", `{"apiKey":"`+testKey+`"}`, "Origin", srv.URL)
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	c := resp.Cookies()[0]
	if c.Name != "__Host-cove_session" || !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("the cookie over HTTPS: %+v", c)
	}
	var login struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &login); err != nil {
		t.Fatal(err)
	}
	if resp, _ := send("GET", "/api/session", "", "Cookie", c.Name+"="+c.Value, csrfHeader, login.CSRF); resp.StatusCode != 200 {
		t.Errorf("the session: %d", resp.StatusCode)
	}
	if resp, _ := send("GET", "/api/session", "", "Cookie", "cove_session="+c.Value, csrfHeader, login.CSRF); resp.StatusCode != 401 {
		t.Errorf("a planted cove_session cookie over HTTPS: %d, want 401", resp.StatusCode)
	}
}

// call sends a request with the headers given as name, value pairs.
func call(t *testing.T, method, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestSession(t *testing.T) {
	srv, st := newTest(t)
	u := srv.URL + Prefix

	// The page itself, and its headers.
	resp, body := call(t, "GET", u+"/", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `<script type="module" src="app.js">`) ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("the page: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := call(t, "GET", u+"/vendor/xterm.mjs", ""); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("xterm.mjs: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// Logging in.
	if resp, body := call(t, "POST", u+"/login", `{"apiKey":"e2b_`+strings.Repeat("2", 40)+`"}`); resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Errorf("a wrong key: %d %s %v", resp.StatusCode, body, resp.Cookies())
	}
	if resp, _ := call(t, "POST", u+"/login", `{"apiKey":"`+testKey+`"}`, "Origin", "https://evil.example"); resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Errorf("a login from another origin: %d", resp.StatusCode)
	}
	resp, body = call(t, "POST", u+"/login", `{"apiKey":"`+testKey+`"}`, "Origin", srv.URL)
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	c := resp.Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/dashboard/" || strings.Contains(c.Value, testKey) {
		t.Errorf("the cookie: %+v", c)
	}
	var login struct{ Team, CSRF string }
	if err := json.Unmarshal([]byte(body), &login); err != nil || login.Team != "t1" || login.CSRF == "" {
		t.Fatalf("login answer %s", body)
	}
	cookie := c.Name + "=" + c.Value
	session := []string{"Cookie", cookie, csrfHeader, login.CSRF}

	tampered := []byte(c.Value)
	tampered[3] ^= 1
	for _, tc := range []struct {
		name, method, path string
		headers            []string
		want               int
	}{
		{"no cookie", "GET", "/api/session", nil, 401},
		{"the session", "GET", "/api/session", session, 200},
		{"the cookie without the session's token", "GET", "/api/session", []string{"Cookie", cookie}, 401},
		{"a tampered cookie", "GET", "/api/session", []string{"Cookie", c.Name + "=" + string(tampered), csrfHeader, login.CSRF}, 401},
		{"the API as the team", "GET", "/api/e2b/v2/sandboxes", session, 200},
		{"a change without the CSRF header", "DELETE", "/api/e2b/sandboxes/x", []string{"Cookie", cookie}, 401},
		{"a change with a wrong CSRF header", "DELETE", "/api/e2b/sandboxes/x", []string{"Cookie", cookie, csrfHeader, "nope"}, 401},
		{"a change from another site", "DELETE", "/api/e2b/sandboxes/x", append(session, "Sec-Fetch-Site", "cross-site"), 403},
		{"a change from another origin", "DELETE", "/api/e2b/sandboxes/x", append(session, "Origin", "http://evil.example"), 403},
		{"a change with the CSRF header", "DELETE", "/api/e2b/sandboxes/x", append(session, "Origin", srv.URL), 200},
		{"an unknown route", "GET", "/api/nope", session, 404},
	} {
		resp, body := call(t, tc.method, u+tc.path, "", tc.headers...)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
		if tc.path == "/api/e2b/v2/sandboxes" && (!strings.Contains(body, `"team":"t1"`) || !strings.Contains(body, `"path":"/v2/sandboxes"`) || !strings.Contains(body, `"cookie":""`)) {
			t.Errorf("the API was served %s", body)
		}
	}

	// Keys: made, listed, revoked; revoking the session's own ends it.
	resp, body = call(t, "POST", u+"/api/keys", `{"name":"second"}`, session...)
	var made keyJSON
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &made) != nil || !auth.ValidKeyFormat(made.Key) {
		t.Fatalf("a new key: %d %s", resp.StatusCode, body)
	}
	if k, err := st.APIKey(context.Background(), auth.HashAPIKey(made.Key)); err != nil || k.Team != "t1" {
		t.Errorf("the new key is not the team's: %+v %v", k, err)
	}
	_, body = call(t, "GET", u+"/api/keys", "", session...)
	var keys []keyJSON
	if json.Unmarshal([]byte(body), &keys) != nil || len(keys) != 2 || !keys[0].Current || keys[1].Current || keys[1].Key != "" {
		t.Errorf("keys: %s", body)
	}
	if resp, _ := call(t, "DELETE", u+"/api/keys/"+auth.HashAPIKey(testKey), "", session...); resp.StatusCode != 204 {
		t.Errorf("revoke: %d", resp.StatusCode)
	}
	if resp, body := call(t, "GET", u+"/api/session", "", session...); resp.StatusCode != 401 || !strings.Contains(body, "revoked") {
		t.Errorf("a session of a revoked key: %d %s", resp.StatusCode, body)
	}
}

func TestSessionExpires(t *testing.T) {
	secret := []byte("s")
	s := newSession("t", "h", time.Hour)
	if _, err := decodeSession(secret, s.encode(secret), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeSession(secret, s.encode(secret), time.Now().Add(2*time.Hour)); err == nil {
		t.Error("an expired session is accepted")
	}
	if _, err := decodeSession([]byte("other"), s.encode(secret), time.Now()); err == nil {
		t.Error("a session signed with another secret is accepted")
	}
	if s.csrf(secret) == newSession("t", "h", time.Hour).csrf(secret) {
		t.Error("two sessions share a CSRF token")
	}
}

const otherKey = "e2b_3333333333333333333333333333333333333333" // team t2's

// loginAs logs in with key (and the admin token, when given) and returns
// the session's cookie and token.
func loginAs(t *testing.T, srv *httptest.Server, key, adminToken string) (cookie, token string) {
	t.Helper()
	body := `{"apiKey":"` + key + `"}`
	if adminToken != "" {
		body = `{"apiKey":"` + key + `","adminToken":"` + adminToken + `"}`
	}
	resp, raw := call(t, "POST", srv.URL+Prefix+"/login", body, "Origin", srv.URL)
	var login struct{ CSRF string }
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 || json.Unmarshal([]byte(raw), &login) != nil {
		t.Fatalf("login: %d %s", resp.StatusCode, raw)
	}
	return resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value, login.CSRF
}

// TestPlantedSession: a page on a sibling host ({port}-{id}.localhost)
// can plant a cove_session cookie over plain HTTP, holding its own team's
// valid session; the dashboard never reads it — alone (the victim's page
// holds no token of it), or beside the victim's own session, whose token
// the victim's page sends.
func TestPlantedSession(t *testing.T) {
	t.Parallel()
	srv, st := newTest(t)
	if err := st.AddAPIKey(context.Background(), store.APIKey{Hash: auth.HashAPIKey(otherKey), Team: "t2", Name: "attacker", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	planted, attackerToken := loginAs(t, srv, otherKey, "")
	victim, victimToken := loginAs(t, srv, testKey, "")
	for _, tc := range []struct {
		name    string
		headers []string
		team    string // "": not logged in
	}{
		{"the planted cookie alone", []string{"Cookie", planted}, ""},
		{"the planted cookie, the victim's page's token of none", []string{"Cookie", planted, csrfHeader, ""}, ""},
		{"the planted cookie with the victim's token", []string{"Cookie", planted, csrfHeader, victimToken}, ""},
		{"the planted cookie first, then the victim's", []string{"Cookie", planted + "; " + victim, csrfHeader, victimToken}, "t1"},
		{"the victim's cookie first, then the planted one", []string{"Cookie", victim + "; " + planted, csrfHeader, victimToken}, "t1"},
		{"both cookies and no token", []string{"Cookie", planted + "; " + victim}, ""},
		{"the attacker's own page, his cookie and token", []string{"Cookie", planted, csrfHeader, attackerToken}, "t2"},
	} {
		resp, body := call(t, "GET", srv.URL+Prefix+"/api/e2b/v2/sandboxes", "", tc.headers...)
		switch {
		case tc.team == "" && resp.StatusCode != 401:
			t.Errorf("%s: %d %s, want 401", tc.name, resp.StatusCode, body)
		case tc.team != "" && (resp.StatusCode != 200 || !strings.Contains(body, `"team":"`+tc.team+`"`)):
			t.Errorf("%s: %d %s, want team %s", tc.name, resp.StatusCode, body, tc.team)
		}
	}
}

// TestNodesView: a team's view of the nodes counts its own sandboxes and
// shows the warm sandboxes of the templates it may see; the operator's
// (a login with the admin token) shows every team's; a wrong admin token
// logs in no one.
func TestNodesView(t *testing.T) {
	t.Parallel()
	const admin = "admin-token-0123456789abcdef0123456789"
	all := []NodeStatus{
		{ID: "n1", Node: "n1", CPUs: 8, MemoryMB: 16384, CommittedCPUMillis: 6000, CommittedMemoryMB: 3072, Sandboxes: 3, Warm: map[string]int{"t1-tpl": 1, "t2-tpl": 2, "base": 1}},
		{ID: "n2", Node: "n2", CPUs: 8, MemoryMB: 16384, CommittedCPUMillis: 2000, CommittedMemoryMB: 1024, Sandboxes: 1, Warm: map[string]int{"t2-tpl": 1}},
	}
	srv, st := newTestWith(t, func(c *Config) {
		c.AdminToken = admin
		c.Nodes = func(context.Context) ([]NodeStatus, error) {
			out := slices.Clone(all)
			for i := range out {
				out[i].Warm = maps.Clone(out[i].Warm)
			}
			return out, nil
		}
		c.CanSee = func(team, id string) bool { return id == "base" || strings.HasPrefix(id, team+"-") }
	})
	ctx := context.Background()
	if err := st.AddAPIKey(ctx, store.APIKey{Hash: auth.HashAPIKey(otherKey), Team: "t2", Name: "other", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for i, sb := range []store.Sandbox{{Team: "t1", Node: "n1"}, {Team: "t2", Node: "n1"}, {Team: "t2", Node: "n1"}, {Team: "t2", Node: "n2"}} {
		sb.ID, sb.TemplateID, sb.State, sb.CPUCount, sb.MemoryMB = fmt.Sprint("sb", i), "base", "running", 2, 1024
		sb.StartedAt, sb.EndAt = time.Now(), time.Now().Add(time.Hour)
		if err := st.InsertSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	nodesOf := func(cookie, token string) []NodeStatus {
		t.Helper()
		resp, body := call(t, "GET", srv.URL+Prefix+"/api/nodes", "", "Cookie", cookie, csrfHeader, token)
		var out []NodeStatus
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("nodes: %d %s", resp.StatusCode, body)
		}
		return out
	}
	type view struct {
		sandboxes int
		cpu, mem  int64
		warm      map[string]int
	}
	for _, tc := range []struct {
		name, key, admin string
		want             []view
	}{
		{"team t1", testKey, "", []view{{1, 2000, 1024, map[string]int{"t1-tpl": 1, "base": 1}}, {0, 0, 0, map[string]int{}}}},
		{"team t2", otherKey, "", []view{{2, 4000, 2048, map[string]int{"t2-tpl": 2, "base": 1}}, {1, 2000, 1024, map[string]int{"t2-tpl": 1}}}},
		{"the operator", testKey, admin, []view{{3, 6000, 3072, all[0].Warm}, {1, 2000, 1024, all[1].Warm}}},
	} {
		got := nodesOf(loginAs(t, srv, tc.key, tc.admin))
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %+v", tc.name, got)
		}
		for i, w := range tc.want {
			g := got[i]
			if g.Sandboxes != w.sandboxes || g.CommittedCPUMillis != w.cpu || g.CommittedMemoryMB != w.mem || !maps.Equal(g.Warm, w.warm) || g.CPUs != 8 {
				t.Errorf("%s: node %s is %+v, want %+v", tc.name, g.ID, g, w)
			}
		}
	}
	if resp, body := call(t, "POST", srv.URL+Prefix+"/login", `{"apiKey":"`+testKey+`","adminToken":"wrong"}`, "Origin", srv.URL); resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Errorf("a login with a wrong admin token: %d %s", resp.StatusCode, body)
	}
}
