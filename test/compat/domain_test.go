package compat

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestDomainMode runs the official SDK as E2B's cloud is used: E2B_DOMAIN
// and the key alone, so the SDK calls https://api.<domain> and
// https://49983-<id>.<domain>, served over TLS with a certificate from the
// server's local CA, which Node trusts through NODE_EXTRA_CA_CERTS; and
// the Python SDK's transport test and HTTPS to a sandbox's port over TLS.
func TestDomainMode(t *testing.T) {
	srv, domain := startDomainServer(t)
	npmInstall(t)
	runNode(t, domainEnv(srv, domain), "domain.test.mjs")
	// The Python SDK (its HTTP client, rustls, reads SSL_CERT_FILE): HTTP/2
	// by ALPN, for the API and the agent alike; and a sandbox's port at
	// https://{get_host(port)} with Python's ssl, curl and Node.
	ca := filepath.Join(srv.DataDir, "tls", "ca.pem")
	runPytest(t, append(domainEnv(srv, domain), "SSL_CERT_FILE="+ca, "COMPAT_CA_FILE="+ca), "test_transport.py", "test_https.py")
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the suite left sandboxes behind: %v", left)
	}
}

// startDomainServer starts a server in E2B's domain mode on a loopback
// port, its domain cove.localhost:<port>, once its HTTPS listener is open.
func startDomainServer(t *testing.T, extra ...string) (testutil.Server, string) {
	t.Helper()
	port := testutil.FreePort(t)
	domain := "cove.localhost:" + strconv.Itoa(port)
	srv := testutil.StartServer(t, apiKey, append([]string{"--domain", domain, "--tls-listen", "127.0.0.1:" + strconv.Itoa(port)}, extra...)...)
	testkit.Eventually(t, 30*time.Second, func() error {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			return nil
		}
		return errors.New("the HTTPS listener did not open")
	})
	return srv, domain
}

// domainEnv points the official SDK at srv's domain, trusting its CA.
func domainEnv(srv testutil.Server, domain string) []string {
	return []string{"E2B_DOMAIN=" + domain, "E2B_API_KEY=" + apiKey,
		"NODE_EXTRA_CA_CERTS=" + filepath.Join(srv.DataDir, "tls", "ca.pem")}
}
