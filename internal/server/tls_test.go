package server

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/localca"
)

// TestSandboxHostCertificates: with the local CA, a client that names a
// sandbox host ({port}-{id}.<domain>, in the default mode and in domain
// mode) gets a certificate for that host alone, which verifies against
// the CA's ca.pem (a wildcard directly under "localhost" does not for
// OpenSSL, rustls or Node); any other name gets the certificate for the
// domain, api.<domain> and *.<domain>. The operator's certificate is
// served for every name.
func TestSandboxHostCertificates(t *testing.T) {
	t.Parallel()
	const id = "i0123456789abcdefghi"
	static := func(host string) []string { return []string{host, "api." + host, "*." + host} }
	for _, tc := range []struct {
		domain, sni string
		want        []string // the names of the certificate served
	}{
		{"localhost:3000", "8080-" + id + ".localhost", []string{"8080-" + id + ".localhost"}},
		{"localhost:3000", "49983-" + id + "-clientid.localhost", []string{"49983-" + id + "-clientid.localhost"}},
		{"localhost:3000", "8080-" + strings.ToUpper(id) + ".LOCALHOST", []string{"8080-" + id + ".localhost"}},
		{"localhost:3000", "65535-x.localhost", []string{"65535-x.localhost"}},
		{"cove.localhost:8443", "8080-" + id + ".cove.localhost", []string{"8080-" + id + ".cove.localhost"}},
		{"sandbox.example.com", "6080-" + id + ".sandbox.example.com", []string{"6080-" + id + ".sandbox.example.com"}},
		// Names of another shape: the domain's certificate, nothing made.
		{"localhost:3000", "", static("localhost")},
		{"localhost:3000", "api.localhost", static("localhost")},
		{"localhost:3000", "localhost", static("localhost")},
		{"localhost:3000", "8080-" + id + ".other.localhost", static("localhost")},
		{"localhost:3000", "8080-" + id + ".example.com", static("localhost")},
		{"localhost:3000", "0-" + id + ".localhost", static("localhost")},
		{"localhost:3000", "65536-" + id + ".localhost", static("localhost")},
		{"localhost:3000", "08080-" + id + ".localhost", static("localhost")},
		{"localhost:3000", "+8080-" + id + ".localhost", static("localhost")},
		{"localhost:3000", "8080.localhost", static("localhost")},
		{"localhost:3000", "8080-.localhost", static("localhost")},
		{"localhost:3000", "8080-" + id + "-.localhost", static("localhost")},
		{"localhost:3000", "8080-" + id + "_x.localhost", static("localhost")},
		{"localhost:3000", "8080-" + strings.Repeat("a", 59) + ".localhost", static("localhost")}, // a label of 64
		{"cove.localhost:8443", "8080-" + id + ".localhost", static("cove.localhost")},
	} {
		dir := t.TempDir()
		cfg, caPath, err := tlsConfig(dir, tc.domain, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if caPath != filepath.Join(dir, "tls", localca.CertFile) {
			t.Errorf("the CA's file is %q", caPath)
		}
		cert := served(t, cfg, tc.sni)
		if !slices.Equal(cert.DNSNames, tc.want) {
			t.Errorf("%s, %q: a certificate for %v, want %v", tc.domain, tc.sni, cert.DNSNames, tc.want)
		}
		if len(tc.want) == 1 {
			pemBytes, err := os.ReadFile(caPath)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(pemBytes)
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: tc.want[0], Roots: roots}); err != nil {
				t.Errorf("%s, %q: %v", tc.domain, tc.sni, err)
			}
		}
	}

	// The operator's certificate, whatever the name.
	dir := t.TempDir()
	ca, err := localca.Load("", "the operator's CA")
	if err != nil {
		t.Fatal(err)
	}
	own, err := ca.Issue([]string{"*.sandbox.example.com"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(own.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: own.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, caPath, err := tlsConfig(dir, "localhost:3000", certFile, keyFile)
	if err != nil || caPath != "" {
		t.Fatalf("the operator's certificate: %v, CA %q", err, caPath)
	}
	for _, sni := range []string{"8080-" + id + ".localhost", "8080-" + id + ".sandbox.example.com", ""} {
		if cert := served(t, cfg, sni); !slices.Equal(cert.DNSNames, []string{"*.sandbox.example.com"}) {
			t.Errorf("the operator's certificate, %q: one for %v served", sni, cert.DNSNames)
		}
	}
}

// served is the certificate a server with cfg shows a client naming sni
// ("": none).
func served(t *testing.T, cfg *tls.Config, sni string) *x509.Certificate {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	go func() { _ = tls.Server(s, cfg).Handshake() }()
	client := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // the test verifies it
	if err := client.Handshake(); err != nil {
		t.Fatalf("handshake for %q: %v", sni, err)
	}
	return client.ConnectionState().PeerCertificates[0]
}
