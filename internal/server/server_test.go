package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

const (
	keyA = "e2b_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	keyB = "e2b_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" // another team
)

type srv struct {
	url, dataDir string
}

func start(t *testing.T) srv { return startWith(t, nil) }

// startWith starts a server in this process that stops when the test ends,
// killing first whatever sandboxes a failed test left (a server leaves
// running sandboxes to its next start by design).
func startWith(t *testing.T, edit func(*server.Config)) srv {
	s, stop := startStoppable(t, edit)
	t.Cleanup(func() {
		s.killAll(t)
		stop()
	})
	return s
}

// killAll kills every sandbox of both test teams.
func (s srv) killAll(t *testing.T) {
	for _, key := range []string{keyA, keyB} {
		_, _, raw := s.do(t, "GET", "/v2/sandboxes", key, "")
		var list []struct {
			SandboxID string `json:"sandboxID"`
		}
		_ = json.Unmarshal(raw, &list)
		for _, sb := range list {
			s.do(t, "DELETE", "/sandboxes/"+sb.SandboxID, key, "")
		}
		// Volumes too: their mounts must not outlive the test's directory.
		_, _, raw = s.do(t, "GET", "/volumes", key, "")
		var vols []struct {
			VolumeID string `json:"volumeID"`
		}
		_ = json.Unmarshal(raw, &vols)
		for _, v := range vols {
			s.do(t, "DELETE", "/volumes/"+v.VolumeID, key, "")
		}
	}
}

// startStoppable starts a server in this process; edit adjusts its
// config; stop (idempotent) shuts it down.
func startStoppable(t *testing.T, edit func(*server.Config)) (srv, func()) {
	t.Helper()
	testkit.NeedRoot(t, "")
	dataDir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dataDir, "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddAPIKey(context.Background(), store.APIKey{Hash: auth.HashAPIKey(keyB), Team: "other", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	cfg := server.Config{Listen: "127.0.0.1:0", DataDir: dataDir, Domain: "localhost",
		CgroupParent: "cove-test-" + filepath.Base(filepath.Dir(dataDir)),
		APIKeys:      []string{keyA}, Out: io.Discard, Ready: func(a net.Addr) { ready <- a }}
	if edit != nil {
		edit(&cfg)
	}
	go func() { done <- server.Run(ctx, cfg, logx.Discard()) }()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("server: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		})
	}
	return srv{url: "http://" + addr.String(), dataDir: cfg.DataDir}, stop
}

func (s srv) do(t *testing.T, method, path, key, body string) (int, map[string]any, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, raw
}

func (s srv) create(t *testing.T, key string) map[string]any {
	t.Helper()
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", key, `{"templateID":"base","timeout":120}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	return m
}

func (s srv) leftovers() []string { return testutil.Leftovers(s.dataDir) }

func TestAPIErrors(t *testing.T) {
	s := start(t)
	sb := s.create(t, keyA)
	id := sb["sandboxID"].(string)
	tests := []struct {
		name, method, path, key, body string
		status                        int
		message                       string
	}{
		{"no key", "POST", "/v2/sandboxes", "", `{}`, 401, "missing API key"},
		{"wrong key", "GET", "/v2/sandboxes", "e2b_" + strings.Repeat("0", 40), "", 401, "invalid API key"},
		{"malformed JSON", "POST", "/v2/sandboxes", keyA, `{"templateID":`, 400, "malformed JSON"},
		{"negative timeout", "POST", "/v2/sandboxes", keyA, `{"timeout":-5}`, 400, "Timeout must be greater than 0"},
		{"too long a timeout", "POST", "/v2/sandboxes", keyA, `{"timeout":999999}`, 400, "Timeout cannot be greater"},
		{"unknown template", "POST", "/v2/sandboxes", keyA, `{"templateID":"nope"}`, 404, "template 'nope' not found"},
		{"wrong type", "POST", "/v2/sandboxes", keyA, `{"timeout":"soon"}`, 400, "malformed JSON"},
		{"oversized body", "POST", "/v2/sandboxes", keyA, `{"metadata":{"k":"` + strings.Repeat("x", 2<<20) + `"}}`, 400, "larger than"},
		{"unknown sandbox", "GET", "/sandboxes/iunknown", keyA, "", 404, "not found"},
		{"bad id", "GET", "/sandboxes/NOT_AN_ID", keyA, "", 400, "invalid sandbox id"},
		{"another team's sandbox", "GET", "/sandboxes/" + id, keyB, "", 404, "not found"},
		{"kill another team's sandbox", "DELETE", "/sandboxes/" + id, keyB, "", 404, "not found"},
		{"time out another team's sandbox", "POST", "/sandboxes/" + id + "/timeout", keyB, `{"timeout":1}`, 404, "not found"},
		{"connect another team's sandbox", "POST", "/sandboxes/" + id + "/connect", keyB, `{"timeout":10}`, 404, "not found"},
		{"metrics of another team's sandbox", "GET", "/sandboxes/" + id + "/metrics", keyB, "", 404, "not found"},
		{"timeout update without a timeout", "POST", "/sandboxes/" + id + "/timeout", keyA, `{}`, 400, "timeout is required"},
		{"timeout of 0 of another team's sandbox", "POST", "/sandboxes/" + id + "/timeout", keyB, `{"timeout":0}`, 404, "not found"},
		{"auto-pause without memory and auto-resume", "POST", "/v2/sandboxes", keyA, `{"autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":true}}`, 400, "cannot be combined"},
		{"auto-resume without auto-pause", "POST", "/v2/sandboxes", keyA, `{"autoResume":{"enabled":true}}`, 400, "autoResume needs autoPause"},
		{"mount an unknown volume", "POST", "/v2/sandboxes", keyA, `{"volumeMounts":[{"name":"nope","path":"/data"}]}`, 400, "not found"},
		{"mount a volume over /proc", "POST", "/v2/sandboxes", keyA, `{"volumeMounts":[{"name":"nope","path":"/proc/x"}]}`, 400, "reserved"},
		{"mount a volume at a relative path", "POST", "/v2/sandboxes", keyA, `{"volumeMounts":[{"name":"nope","path":"data"}]}`, 400, "absolute"},
		{"volume with a bad name", "POST", "/volumes", keyA, `{"name":"a/b"}`, 400, "may hold only"},
		{"volume content without its token", "GET", "/volumecontent/vaaaaaaaaaaaaaaaaaaaa/dir?path=/", keyA, "", 401, "invalid volume token"},
		{"resume a running sandbox", "POST", "/sandboxes/" + id + "/resume", keyA, `{"timeout":60}`, 409, "already running"},
		{"pause another team's sandbox", "POST", "/sandboxes/" + id + "/pause", keyB, `{}`, 404, "not found"},
		{"template without a name", "POST", "/v3/templates", keyA, `{}`, 400, "name is required"},
		{"template with a bad name", "POST", "/v3/templates", keyA, `{"name":"Bad Name"}`, 400, "may hold only"},
		{"v1 template build", "POST", "/templates", keyA, `{}`, 501, "deprecated"},
		{"unknown template build", "GET", "/templates/nope/builds/x/status", keyA, "", 404, "template 'nope' not found"},
		{"upload without a token", "PUT", "/templates/nope/files/" + strings.Repeat("a", 64), "", "x", 401, "upload token"},
		{"bad list limit", "GET", "/v2/sandboxes?limit=0", keyA, "", 400, "limit"},
		{"bad next token", "GET", "/v2/sandboxes?nextToken=not-a-token!", keyA, "", 400, ""},
		{"bad startedAfter", "GET", "/v2/sandboxes?startedAfter=yesterday", keyA, "", 400, "RFC 3339"},
		{"bad metrics start", "GET", "/sandboxes/" + id + "/metrics?start=soon", keyA, "", 400, "unix time"},
		{"metrics window backwards", "GET", "/sandboxes/" + id + "/metrics?start=20&end=10", keyA, "", 400, "end is before start"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, m, raw := s.do(t, tc.method, tc.path, tc.key, tc.body)
			if code != tc.status || int(m["code"].(float64)) != tc.status || !strings.Contains(fmt.Sprint(m["message"]), tc.message) {
				t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, code, raw, tc.status, tc.message)
			}
		})
	}
	// The other team sees none of team A's sandboxes.
	if code, _, raw := s.do(t, "GET", "/v2/sandboxes", keyB, ""); code != 200 || string(bytes.TrimSpace(raw)) != "[]" {
		t.Errorf("other team's list: %d %s", code, raw)
	}
	// Failed creates left nothing: one sandbox, one record.
	if left := s.leftovers(); len(left) != 2 {
		t.Errorf("after failed creates the node holds %v, want just %s", left, id)
	}
	if code, _, _ := s.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
		t.Errorf("kill: %d", code)
	}
	// A timeout below 0 ends a sandbox now, as E2B's does: killed (no
	// auto-pause) before the answer.
	ended := s.create(t, keyA)["sandboxID"].(string)
	if code, _, raw := s.do(t, "POST", "/sandboxes/"+ended+"/timeout", keyA, `{"timeout":-1}`); code != 204 {
		t.Errorf("timeout of -1: %d %s, want 204", code, raw)
	}
	if code, _, raw := s.do(t, "GET", "/sandboxes/"+ended, keyA, ""); code != 404 {
		t.Errorf("after a timeout of -1: %d %s, want 404", code, raw)
	}
	if left := s.leftovers(); len(left) != 0 {
		t.Errorf("after the kill the node holds %v", left)
	}
}

// headerTransport routes every request to one sandbox through the proxy.
type headerTransport struct{ id, token string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", h.id)
	r.Header.Set("E2b-Sandbox-Port", "49983")
	r.Header.Set("X-Access-Token", h.token)
	return http.DefaultTransport.RoundTrip(r)
}

func run(ctx context.Context, url, id, token, cmd string) (string, error) {
	c := processconnect.NewProcessClient(&http.Client{Transport: headerTransport{id, token}}, url)
	off := false
	stream, err := c.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", cmd}}, Stdin: &off}))
	if err != nil {
		return "", err
	}
	defer stream.Close()
	var out strings.Builder
	for stream.Receive() {
		out.Write(stream.Msg().GetEvent().GetData().GetStdout())
	}
	return out.String(), stream.Err()
}

// TestConcurrentCreates creates 100 sandboxes at once through the API, runs
// a command in each through the proxy, kills them all and finds nothing left.
func TestConcurrentCreates(t *testing.T) {
	s := start(t)
	const n = 100
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, n)
	ids := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":300}`)
			if code != 201 {
				errc <- fmt.Errorf("create: %d %s", code, raw)
				return
			}
			id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
			ids <- id
			out, err := run(ctx, s.url, id, tok, "echo $E2B_SANDBOX_ID")
			if err != nil || out != id+"\n" {
				errc <- fmt.Errorf("run in %s: %q %v", id, out, err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	close(ids)
	for err := range errc {
		t.Error(err)
	}
	count := 0
	for id := range ids {
		count++
		if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
			t.Errorf("kill %s: %d %s", id, code, raw)
		}
	}
	if count != n {
		t.Errorf("%d of %d creates succeeded", count, n)
	}
	if code, _, raw := s.do(t, "GET", "/v2/sandboxes", keyA, ""); code != 200 || string(bytes.TrimSpace(raw)) != "[]" {
		t.Errorf("list after killing all: %d %s", code, raw)
	}
	if left := s.leftovers(); len(left) != 0 {
		t.Errorf("left after killing all: %v", left)
	}
}

// TestPorts reaches a server a sandbox runs on 127.0.0.1 through the proxy,
// by header and by host name, with and without the traffic token.
func TestPorts(t *testing.T) {
	s := start(t)
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"network":{"allowPublicTraffic":false}}`)
	if code != 201 || m["trafficAccessToken"] == nil {
		t.Fatalf("create private: %d %s", code, raw)
	}
	id, tok, traffic := m["sandboxID"].(string), m["envdAccessToken"].(string), m["trafficAccessToken"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go run(ctx, s.url, id, tok, "cd /tmp && echo served > index.html && exec python3 -m http.server 8080 --bind 127.0.0.1")

	get := func(port, host, token string) (int, string) {
		req, _ := http.NewRequest("GET", s.url+"/index.html", nil)
		if host != "" {
			req.Host = host
		} else {
			req.Header.Set("E2b-Sandbox-Id", id)
			req.Header.Set("E2b-Sandbox-Port", port)
		}
		if token != "" {
			req.Header.Set("E2b-Traffic-Access-Token", token)
		}
		if port == "49983" { // the agent's own credential
			req.Header.Set("X-Access-Token", tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if code, _ := get("8080", "", traffic); code != 200 {
			return fmt.Errorf("the sandbox's server answers %d through the proxy", code)
		}
		return nil
	})
	_, port, _ := strings.Cut(strings.TrimPrefix(s.url, "http://"), ":")
	tests := []struct {
		name, port, host, token string
		status                  int
		body                    string
	}{
		{"by header with the token", "8080", "", traffic, 200, "served\n"},
		{"by host name with the token", "", "8080-" + id + ".localhost:" + port, traffic, 200, "served\n"},
		{"without the token", "8080", "", "", 403, "traffic is private"},
		{"with a wrong token", "8080", "", "nope", 403, "traffic is private"},
		{"a closed port", "9999", "", traffic, 502, `"port":9999`},
		{"an unknown sandbox", "", "8080-inosuchsandbox.localhost:" + port, traffic, 502, "The sandbox was not found"},
		{"the agent needs no traffic token (its own token only)", "49983", "", "", 404, ""},
	}
	for _, tc := range tests {
		code, body := get(tc.port, tc.host, tc.token)
		if code != tc.status || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, code, body, tc.status, tc.body)
		}
	}
	// The same port speaks HTTPS too (the URLs SDKs make https://, the
	// desktop's stream among them), with the data directory's local CA.
	ca, err := os.ReadFile(filepath.Join(s.dataDir, "tls", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	addr := strings.TrimPrefix(s.url, "http://")
	httpsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	req, _ := http.NewRequest("GET", "https://8080-"+id+".localhost:"+port+"/index.html", nil)
	req.Header.Set("E2b-Traffic-Access-Token", traffic)
	if resp, err := httpsClient.Do(req); err != nil {
		t.Errorf("HTTPS on the plain port: %v", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "served\n" || resp.TLS == nil {
			t.Errorf("HTTPS on the plain port: %d %q", resp.StatusCode, b)
		}
	}
	// An upgraded connection (WebSocket) passes through both ways.
	go run(ctx, s.url, id, tok, `exec python3 -c '
import socketserver
class H(socketserver.StreamRequestHandler):
    def handle(self):
        while self.rfile.readline() not in (b"\r\n", b""): pass
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        while True:
            d = self.request.recv(4096)
            if not d: break
            self.request.sendall(d)
socketserver.ThreadingTCPServer(("127.0.0.1", 8090), H).serve_forever()
'`)
	var upgraded string
	if !testkit.Wait(20*time.Second, func() bool {
		upgraded = upgrade(t, strings.TrimPrefix(s.url, "http://"), "8090-"+id+".localhost:"+port, traffic)
		return upgraded == "ping"
	}) {
		t.Errorf("through an upgraded connection: %q, want the echo", upgraded)
	}
	if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
		t.Errorf("kill: %d %s", code, raw)
	}
}

// upgrade asks host (through the proxy at addr) to switch protocols, sends
// "ping" on the upgraded connection and returns what comes back.
func upgrade(t *testing.T, addr, host, token string) string {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nE2b-Traffic-Access-Token: %s\r\n\r\n", host, token)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		return ""
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		return ""
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil {
		return ""
	}
	return string(buf)
}

// TestTemplateTeams: a team's template is its own: another team cannot
// start sandboxes from it (by name or id), build on it, see its builds or
// delete it; names are a team's own, so the alias check answers 404 for
// another team's and that team may take the name for a template of its
// own.
func TestTemplateTeams(t *testing.T) {
	s := start(t)
	code, m, raw := s.do(t, "POST", "/v3/templates", keyA, `{"name":"team-a-tpl"}`)
	if code != 202 {
		t.Fatalf("request a build: %d %s", code, raw)
	}
	id, build := m["templateID"].(string), m["buildID"].(string)
	buildTemplate(t, s, s, id, build, `{"fromTemplate":"base","steps":[{"type":"ENV","args":["OWNER","a"]}]}`)
	_, mb, _ := s.do(t, "POST", "/v3/templates", keyB, `{"name":"team-b-tpl"}`)
	for _, tc := range []struct {
		name, method, path, key, body string
		want                          int
	}{
		{"alias seen by its team", "GET", "/templates/aliases/team-a-tpl", keyA, "", 200},
		{"alias of another team's", "GET", "/templates/aliases/team-a-tpl", keyB, "", 404},
		{"sandbox from another's template", "POST", "/v2/sandboxes", keyB, `{"templateID":"team-a-tpl"}`, 404},
		{"sandbox from another's template by id", "POST", "/v2/sandboxes", keyB, `{"templateID":"` + id + `"}`, 404},
		{"build on another's template", "POST", "/v2/templates/" + mb["templateID"].(string) + "/builds/" + mb["buildID"].(string), keyB, `{"fromTemplate":"team-a-tpl"}`, 404},
		{"another's build status", "GET", "/templates/" + id + "/builds/" + build + "/status", keyB, "", 404},
		{"delete another's template", "DELETE", "/templates/" + id, keyB, "", 404},
		{"the name for another team", "POST", "/v3/templates", keyB, `{"name":"team-a-tpl"}`, 202},
	} {
		if code, _, raw := s.do(t, tc.method, tc.path, tc.key, tc.body); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, raw, tc.want)
		}
	}
	code, sb, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"team-a-tpl","timeout":60}`)
	if code != 201 || sb["templateID"] != id {
		t.Fatalf("own team's sandbox: %d %s", code, raw)
	}
	s.do(t, "DELETE", "/sandboxes/"+sb["sandboxID"].(string), keyA, "")
	if _, m, raw := s.do(t, "GET", "/templates/aliases/team-a-tpl", keyB, ""); m["templateID"] == id {
		t.Errorf("team B's alias of its own template of the name: %s", raw)
	}
}
