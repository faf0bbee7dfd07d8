package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.AddAPIKey(context.Background(), store.APIKey{Hash: auth.HashAPIKey(testKey), Team: "t1", Name: "k", CreatedAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), Config{Store: st, API: teamAPI{}, Log: slog.New(slog.DiscardHandler),
		Nodes: func(context.Context) ([]NodeStatus, error) { return nil, nil }})
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
	if resp, _ := send("GET", "/api/session", "", "Cookie", c.Name+"="+c.Value); resp.StatusCode != 200 {
		t.Errorf("the session: %d", resp.StatusCode)
	}
	if resp, _ := send("GET", "/api/session", "", "Cookie", "cove_session="+c.Value); resp.StatusCode != 401 {
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

	tampered := []byte(c.Value)
	tampered[3] ^= 1
	for _, tc := range []struct {
		name, method, path string
		headers            []string
		want               int
	}{
		{"no cookie", "GET", "/api/session", nil, 401},
		{"the session", "GET", "/api/session", []string{"Cookie", cookie}, 200},
		{"a tampered cookie", "GET", "/api/session", []string{"Cookie", c.Name + "=" + string(tampered)}, 401},
		{"the API as the team", "GET", "/api/e2b/v2/sandboxes", []string{"Cookie", cookie}, 200},
		{"a change without the CSRF header", "DELETE", "/api/e2b/sandboxes/x", []string{"Cookie", cookie}, 403},
		{"a change with a wrong CSRF header", "DELETE", "/api/e2b/sandboxes/x", []string{"Cookie", cookie, csrfHeader, "nope"}, 403},
		{"a change from another site", "DELETE", "/api/e2b/sandboxes/x", []string{"Cookie", cookie, csrfHeader, login.CSRF, "Sec-Fetch-Site", "cross-site"}, 403},
		{"a change from another origin", "DELETE", "/api/e2b/sandboxes/x", []string{"Cookie", cookie, csrfHeader, login.CSRF, "Origin", "http://evil.example"}, 403},
		{"a change with the CSRF header", "DELETE", "/api/e2b/sandboxes/x", []string{"Cookie", cookie, csrfHeader, login.CSRF, "Origin", srv.URL}, 200},
		{"an unknown route", "GET", "/api/nope", []string{"Cookie", cookie}, 404},
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
	resp, body = call(t, "POST", u+"/api/keys", `{"name":"second"}`, "Cookie", cookie, csrfHeader, login.CSRF)
	var made keyJSON
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &made) != nil || !auth.ValidKeyFormat(made.Key) {
		t.Fatalf("a new key: %d %s", resp.StatusCode, body)
	}
	if k, err := st.APIKey(context.Background(), auth.HashAPIKey(made.Key)); err != nil || k.Team != "t1" {
		t.Errorf("the new key is not the team's: %+v %v", k, err)
	}
	_, body = call(t, "GET", u+"/api/keys", "", "Cookie", cookie)
	var keys []keyJSON
	if json.Unmarshal([]byte(body), &keys) != nil || len(keys) != 2 || !keys[0].Current || keys[1].Current || keys[1].Key != "" {
		t.Errorf("keys: %s", body)
	}
	if resp, _ := call(t, "DELETE", u+"/api/keys/"+auth.HashAPIKey(testKey), "", "Cookie", cookie, csrfHeader, login.CSRF); resp.StatusCode != 204 {
		t.Errorf("revoke: %d", resp.StatusCode)
	}
	if resp, body := call(t, "GET", u+"/api/session", "", "Cookie", cookie); resp.StatusCode != 401 || !strings.Contains(body, "revoked") {
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
