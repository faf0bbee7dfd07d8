package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

// testCA is a CA of the test's own and the certificates it signs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t *testing.T, dir string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cove test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", der)
	return testCA{cert: cert, key: key, dir: dir}
}

// issue writes name.crt and name.key: a certificate for dnsNames (none:
// for 127.0.0.1), good for a server and a client.
func (ca testCA) issue(t *testing.T, name string, dnsNames ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: dnsNames, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if len(dnsNames) == 0 {
		tpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClusterNodeTLS: with the node API's TLS, a node serves HTTPS and
// advertises it; the replica's calls, proxied commands and volume
// content go over it, the node's certificate checked for the name the
// replica is given (as the chart's, which cannot know pods' addresses); a caller without a certificate of the cluster's CA
// gets nothing but the probes' /healthz, one of another CA not even a
// connection; a role given only part of the settings does not start.
func TestClusterNodeTLS(t *testing.T) {
	dsn := testutil.Postgres(t)
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	withTLS := func(name string) func(*server.Config) {
		certFile, keyFile := ca.issue(t, name, "cove-node")
		return func(c *server.Config) {
			c.NodeTLSCert, c.NodeTLSKey, c.NodeTLSCA = certFile, keyFile, filepath.Join(dir, "ca.crt")
			c.NodeTLSServerName = "cove-node"
		}
	}
	n := startRole(t, false, "n1", dsn, "", "", withTLS("n1"))
	a := startRole(t, true, "api1", dsn, "", "", withTLS("api1"))
	api := srv{url: a.url, dataDir: a.dataDir}
	defer api.killAll(t)
	st, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ms, err := st.Members(t.Context())
	if err != nil || len(ms) != 1 || !strings.HasPrefix(ms[0].URL, "https://") {
		t.Fatalf("the node reports %+v (%v), want an https URL", ms, err)
	}

	code, m, raw := api.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":60,"secure":true}`)
	if code != 201 {
		t.Fatalf("create over the node API's TLS: %d %s", code, raw)
	}
	if out, err := run(t.Context(), api.url, m["sandboxID"].(string), m["envdAccessToken"].(string), "echo over tls"); err != nil || out != "over tls\n" {
		t.Errorf("a command proxied over TLS: %q %v", out, err)
	}
	code, v, raw := api.do(t, "POST", "/volumes", keyA, `{"name":"tls"}`)
	if code != 201 {
		t.Fatalf("create volume: %d %s", code, raw)
	}
	if code, body := volumeContent(t, api.url, "PUT", v["volumeID"].(string), v["token"].(string), "/file?path=/f", "x"); code != 201 {
		t.Errorf("volume content over TLS: %d %s", code, body)
	}

	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	nodeURL := strings.Replace(n.url, "http://", "https://", 1)
	get := func(cfg *tls.Config, path string) (int, error) {
		cfg.ServerName = "cove-node"
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		resp, err := c.Get(nodeURL + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(&tls.Config{RootCAs: pool}, "/healthz"); err != nil || code != 204 {
		t.Errorf("the probes' /healthz without a client certificate: %d %v", code, err)
	}
	if code, err := get(&tls.Config{RootCAs: pool}, "/dial?id=x&port=49983"); err != nil || code != 401 {
		t.Errorf("the node API without a client certificate: %d %v, want 401", code, err)
	}
	other := newTestCA(t, t.TempDir())
	otherCert, otherKey := other.issue(t, "intruder")
	pair, err := tls.LoadX509KeyPair(otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, "/healthz"); err == nil {
		t.Errorf("a certificate of another CA was taken: %d", code)
	}
	if resp, err := http.Get(n.url + "/healthz"); err == nil && resp.StatusCode < 400 {
		t.Errorf("plain HTTP to the node API's TLS port: %d", resp.StatusCode)
	}
	// Part of the settings: refused at the start.
	cfg := server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Database: dsn, NodeToken: nodeToken, NodeTLSCert: filepath.Join(dir, "ca.crt"), LXCFS: "off"}
	if err := server.RunAPI(t.Context(), cfg, logx.Discard()); err == nil || !strings.Contains(err.Error(), "--node-tls-key") {
		t.Errorf("a replica with a certificate and no key or CA: %v", err)
	}
}
