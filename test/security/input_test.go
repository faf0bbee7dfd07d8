package security_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	cove "github.com/covesandbox/cove/sdk/go"
)

// otherKey belongs to another team than apiKey.
const otherKey = "e2b_5ec0000000000000000000000000000000000002"

// call makes one raw request to the server and returns its status and body.
func call(t *testing.T, method, url string, body io.Reader, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

// authEnv is a server with two teams and one private, secure sandbox of
// the first, serving port 8080.
type authEnv struct {
	p                *coveProc
	id, tok, traffic string
	otherTok         string // another sandbox's agent token
}

func newAuthEnv(t *testing.T) *authEnv {
	e := &authEnv{p: twoTeams(t, "--network=false")}
	create := func(body string) (string, string, string) {
		code, raw := call(t, "POST", e.p.srv.URL+"/v2/sandboxes", strings.NewReader(body), "X-API-Key", apiKey, "Content-Type", "application/json")
		var m struct {
			SandboxID       string  `json:"sandboxID"`
			EnvdAccessToken string  `json:"envdAccessToken"`
			Traffic         *string `json:"trafficAccessToken"`
		}
		if code != 201 || json.Unmarshal([]byte(raw), &m) != nil || m.EnvdAccessToken == "" {
			t.Fatalf("create: %d %s", code, raw)
		}
		tr := ""
		if m.Traffic != nil {
			tr = *m.Traffic
		}
		return m.SandboxID, m.EnvdAccessToken, tr
	}
	e.id, e.tok, e.traffic = create(`{"timeout":600,"network":{"allowPublicTraffic":false}}`)
	if e.traffic == "" {
		t.Fatal("a private sandbox came without a traffic token")
	}
	_, e.otherTok, _ = create(`{"timeout":600}`)
	c := client(t, e.p.srv)
	sb, err := c.Connect(context.Background(), e.id, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Commands.Start(context.Background(), "python3 -m http.server 8080 -d /tmp"); err != nil {
		t.Fatal(err)
	}
	r := mustRun(t, context.Background(), sb, "user", "for i in $(seq 100); do curl -s -o /dev/null localhost:8080/ && echo up && break; sleep 0.05; done")
	if r.out != "up\n" {
		t.Fatalf("the sandbox's web server did not start: %q", r.out)
	}
	if err := sb.Files.WriteFile(context.Background(), "/tmp/served", []byte("served file")); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAuth: every way in without the right credential is refused, and
// the right one works (so each refusal is the credential's doing).
func TestAuth(t *testing.T) {
	e := newAuthEnv(t)
	u := e.p.srv.URL
	agent := []string{"E2b-Sandbox-Id", e.id}
	withAgent := func(h ...string) []string { return append(append([]string{}, agent...), h...) }
	port := strings.TrimPrefix(u, "http://127.0.0.1:")
	startBody := `{"process":{"cmd":"/bin/true"}}`
	connectJSON := []string{"Content-Type", "application/json", "Connect-Protocol-Version", "1"}
	sign := func(path, op, user string, exp int64) string {
		q := url.Values{"path": {path}, "username": {user}, "signature": {envdwire.Signature(path, op, user, e.tok, exp)}}
		if exp != 0 {
			q.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return q.Encode()
	}
	future := time.Now().Add(time.Hour).Unix()
	past := time.Now().Add(-time.Minute).Unix()
	tests := []struct {
		name, method, url, body string
		headers                 []string
		want                    int
	}{
		{"no API key", "GET", u + "/v2/sandboxes", "", nil, 401},
		{"a wrong API key", "GET", u + "/v2/sandboxes", "", []string{"X-API-Key", "e2b_" + strings.Repeat("f", 40)}, 401},
		{"a malformed API key", "GET", u + "/v2/sandboxes", "", []string{"X-API-Key", "Bearer x"}, 401},
		{"the right API key", "GET", u + "/sandboxes/" + e.id, "", []string{"X-API-Key", apiKey}, 200},
		{"another team's key: info", "GET", u + "/sandboxes/" + e.id, "", []string{"X-API-Key", otherKey}, 404},
		{"another team's key: kill", "DELETE", u + "/sandboxes/" + e.id, "", []string{"X-API-Key", otherKey}, 404},
		{"another team's key: timeout", "POST", u + "/sandboxes/" + e.id + "/timeout", `{"timeout":1}`, []string{"X-API-Key", otherKey}, 404},
		{"another team's key: connect", "POST", u + "/sandboxes/" + e.id + "/connect", `{"timeout":10}`, []string{"X-API-Key", otherKey}, 404},
		{"another team's key: metrics", "GET", u + "/sandboxes/" + e.id + "/metrics", "", []string{"X-API-Key", otherKey}, 404},
		{"another team's key: network", "PUT", u + "/sandboxes/" + e.id + "/network", `{}`, []string{"X-API-Key", otherKey}, 404},
		{"agent without a token: a process", "POST", u + "/process.Process/Start", startBody, withAgent(connectJSON...), 401},
		{"agent with a wrong token: a process", "POST", u + "/process.Process/Start", startBody, withAgent(append(connectJSON, "X-Access-Token", "nope")...), 401},
		{"agent with another sandbox's token", "POST", u + "/process.Process/List", `{}`, withAgent(append(connectJSON, "X-Access-Token", e.otherTok)...), 401},
		{"agent with the API key instead", "POST", u + "/process.Process/List", `{}`, withAgent(append(connectJSON, "X-API-Key", apiKey)...), 401},
		{"agent with its token", "POST", u + "/process.Process/List", `{}`, withAgent(append(connectJSON, "X-Access-Token", e.tok)...), 200},
		{"agent without a token: read a file", "GET", u + "/files?path=/tmp/served", "", agent, 401},
		{"agent without a token: write a file", "POST", u + "/files?path=/tmp/refused", "", agent, 401},
		{"agent's internal /init through the proxy", "POST", u + "/init", `{}`, withAgent("X-Access-Token", e.tok), 404},
		{"private port without its token", "GET", u + "/served", "", []string{"E2b-Sandbox-Id", e.id, "E2b-Sandbox-Port", "8080"}, 403},
		{"private port with a wrong token", "GET", u + "/served", "", []string{"E2b-Sandbox-Id", e.id, "E2b-Sandbox-Port", "8080", "E2b-Traffic-Access-Token", "nope"}, 403},
		{"private port with the agent token instead", "GET", u + "/served", "", []string{"E2b-Sandbox-Id", e.id, "E2b-Sandbox-Port", "8080", "E2b-Traffic-Access-Token", e.tok}, 403},
		{"private port by host name without its token", "GET", u + "/served", "", []string{"Host", "8080-" + e.id + ".localhost:" + port}, 403},
		{"private port with its token", "GET", u + "/served", "", []string{"E2b-Sandbox-Id", e.id, "E2b-Sandbox-Port", "8080", "E2b-Traffic-Access-Token", e.traffic}, 200},
		{"signed URL: valid", "GET", u + "/files?" + sign("/tmp/served", "read", "user", future), "", agent, 200},
		{"signed URL: expired", "GET", u + "/files?" + sign("/tmp/served", "read", "user", past), "", agent, 401},
		{"signed URL: another path", "GET", u + "/files?" + strings.Replace(sign("/tmp/served", "read", "user", future), "served", "other", 1), "", agent, 401},
		{"signed URL: another user", "GET", u + "/files?" + strings.Replace(sign("/tmp/served", "read", "user", future), "username=user", "username=root", 1), "", agent, 401},
		{"signed URL: a later expiry", "GET", u + "/files?" + strings.Replace(sign("/tmp/served", "read", "user", future), strconv.FormatInt(future, 10), strconv.FormatInt(future+3600, 10), 1), "", agent, 401},
		{"signed URL: read signature used to write", "POST", u + "/files?" + sign("/tmp/served", "read", "user", future), "", agent, 401},
		{"signed URL: signed by another sandbox's token", "GET", u + "/files?path=%2Ftmp%2Fserved&username=user&signature=" + url.QueryEscape(envdwire.Signature("/tmp/served", "read", "user", e.otherTok, 0)), "", agent, 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			code, raw := call(t, tc.method, tc.url, body, tc.headers...)
			if code != tc.want {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.url, code, raw, tc.want)
			}
		})
	}
	// A signed file opened in a browser on the API's host (the dashboard's
	// origin) runs in an origin of its own: the sandbox wrote it.
	resp, err := http.Get(u + "/files?" + sign("/tmp/served", "read", "user", future))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != "sandbox" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("a signed file: %d, headers %v", resp.StatusCode, resp.Header)
	}
}

// TestBadInput: oversized and malformed requests, and paths that try to
// leave their place, get a clear 4xx and write nothing outside it.
func TestBadInput(t *testing.T) {
	e := newAuthEnv(t)
	u := e.p.srv.URL
	key := []string{"X-API-Key", apiKey, "Content-Type", "application/json"}
	big := `{"metadata":{"k":"` + strings.Repeat("x", 3<<20) + `"}}`
	tests := []struct {
		name, method, path, body string
		want                     int
		msg                      string
	}{
		{"an oversized create", "POST", "/v2/sandboxes", big, 400, "larger than"},
		{"an oversized timeout", "POST", "/sandboxes/" + e.id + "/timeout", `{"timeout":1` + strings.Repeat("0", 3<<20) + `}`, 400, "larger than"},
		{"an oversized template", "POST", "/v3/templates", big, 400, "larger than"},
		{"a timeout that overflows", "POST", "/v2/sandboxes", `{"timeout":18446744074}`, 400, "Timeout cannot be greater"},
		{"a huge timeout update", "POST", "/sandboxes/" + e.id + "/timeout", `{"timeout":9223372036854775807}`, 400, "greater"},
		{"an environment variable with '='", "POST", "/v2/sandboxes", `{"envVars":{"A=B":"x"}}`, 400, "envVars"},
		{"a NUL in a variable", "POST", "/v2/sandboxes", `{"envVars":{"A":"x\u0000y"}}`, 400, "envVars"},
		{"not JSON", "POST", "/v2/sandboxes", `<xml/>`, 400, "malformed JSON"},
		{"a bad sandbox id", "GET", "/sandboxes/..%2F..%2Fetc", "", 400, "invalid sandbox id"},
		{"a template name with a path", "POST", "/v3/templates", `{"name":"../../etc"}`, 400, "must start with a letter or a digit"},
		{"a bad egress rule", "POST", "/v2/sandboxes", `{"network":{"denyOut":["10.0.0.0/33"]}}`, 400, "denyOut"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			code, raw := call(t, tc.method, u+tc.path, body, key...)
			if code != tc.want || !strings.Contains(raw, tc.msg) {
				t.Errorf("%d %.200s, want %d with %q", code, raw, tc.want, tc.msg)
			}
		})
	}

	// Files: paths that climb, symlinks that point out, names with NUL.
	ctx := context.Background()
	sb, err := client(t, e.p.srv).Connect(ctx, e.id, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("cove-bad-input-%d", os.Getpid())
	mustRun(t, ctx, sb, "root", "ln -s / /tmp/rootlink; ln -s /proc/1/root /tmp/agentroot")
	for _, tc := range []struct {
		name, user, path string
		ok               bool // written, inside the sandbox
	}{
		// The files API acts with its user's rights (whoever holds the
		// sandbox's token may still act as root in it: docs/SECURITY.md).
		{"climbing out of home, as the user, into /etc", "user", "../../../../etc/" + marker, false},
		{"climbing out of home, as the user, into /tmp", "user", "../../../../tmp/" + marker + "-u", true},
		{"climbing out of home, as root", "root", "../../../../tmp/" + marker, true},
		{"through a symlink to /", "root", "/tmp/rootlink/tmp/" + marker + "-2", true},
		{"through the agent's root (its own)", "root", "/tmp/agentroot/tmp/" + marker + "-3", true},
		{"into /proc", "root", "/proc/sys/kernel/" + marker, false},
	} {
		t.Run("files: "+tc.name, func(t *testing.T) {
			err := sb.Files.As(tc.user).WriteFile(ctx, tc.path, []byte("x"))
			if tc.ok != (err == nil) {
				t.Errorf("write %s as %s: %v, want written: %v", tc.path, tc.user, err, tc.ok)
			}
			var apiErr *cove.APIError
			if err != nil && errors.As(err, &apiErr) && (apiErr.Status < 400 || apiErr.Status >= 500) {
				t.Errorf("write %s: %d %s, want a 4xx", tc.path, apiErr.Status, apiErr.Message)
			}
		})
	}
	matches, _ := filepath.Glob("/tmp/" + marker + "*")
	if _, err := os.Stat("/etc/" + marker); err == nil || len(matches) > 0 {
		t.Errorf("a sandbox's file write reached the host: %v", matches)
	}
	code, _ := call(t, "GET", u+"/files?path=%00", nil, "E2b-Sandbox-Id", e.id, "X-Access-Token", e.tok)
	if code != 400 {
		t.Errorf("a NUL path: %d, want 400", code)
	}
}
