package compat

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// httpsServer serves "served over TLS" over HTTPS on 127.0.0.1:port in a
// sandbox, with a certificate of its own (self-signed, as most are).
const httpsServer = `cd /tmp && openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem -days 1 -subj /CN=localhost 2>/dev/null && python3 -c "
import http.server, ssl
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b'served over TLS'
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
s = http.server.HTTPServer(('127.0.0.1', %d), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain('c.pem', 'k.pem')
s.socket = c.wrap_socket(s.socket, server_side=True)
s.serve_forever()"`

// TestHTTPSPorts: network.httpsPorts names the ports of a sandbox that
// serve HTTPS (E2B's newer API): the proxy speaks TLS to them, so a plain
// request at the edge reaches the sandbox's HTTPS server; a port not
// named is spoken to in plain HTTP. A bad list is a 400 naming it.
func TestHTTPSPorts(t *testing.T) {
	srv := testutil.StartServer(t, apiKey)
	for _, bad := range []string{`[49983]`, `[0]`, `[8443,8443]`, `[` + strings.TrimSuffix(strings.Repeat("1,", 129), ",") + `]`} {
		if code, m := apiCall(t, srv.URL, "POST", "/v2/sandboxes", `{"templateID":"base","network":{"httpsPorts":`+bad+`}}`); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["message"]), "network.httpsPorts") {
			t.Errorf("httpsPorts %.40s: %d %v, want 400 naming it", bad, code, m)
		}
	}
	code, m := apiCall(t, srv.URL, "POST", "/v2/sandboxes", `{"templateID":"base","timeout":120,"network":{"httpsPorts":[8443]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, m)
	}
	id := m["sandboxID"].(string)
	defer apiCall(t, srv.URL, "DELETE", "/sandboxes/"+id, "")
	c, err := cove.NewClient(cove.WithAPIURL(srv.URL), cove.WithSandboxURL(srv.URL), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.Connect(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{8443, 8444} {
		if _, err := s.Commands.Start(ctx, fmt.Sprintf(httpsServer, port)); err != nil {
			t.Fatal(err)
		}
	}
	get := func(port int) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", fmt.Sprint(port))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testkit.Eventually(t, 60*time.Second, func() error {
		if code, body := get(8443); code != http.StatusOK || body != "served over TLS" {
			return fmt.Errorf("port 8443, named: %d %q", code, body)
		}
		return nil
	})
	// Port 8444 serves HTTPS too, but is not named: plain HTTP reaches it.
	if code, body := get(8444); code == http.StatusOK && body == "served over TLS" {
		t.Errorf("a port not in httpsPorts was spoken to over TLS")
	}
}
