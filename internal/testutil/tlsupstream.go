package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// Upstream is an HTTPS server of the fake internet with a certificate of
// its own CA for its names: what a sandbox's transformed requests reach.
type Upstream struct {
	// Roots trusts its CA; CAFile is that CA in PEM, for a server process
	// (--upstream-ca).
	Roots  *x509.CertPool
	CAFile string
	cert   tls.Certificate
}

// NewUpstream makes an upstream's CA and its certificate for names (the
// CA first: a node that verifies upstreams may need it before the fake
// internet exists).
func NewUpstream(t testing.TB, names ...string) *Upstream {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	up := &Upstream{Roots: x509.NewCertPool(), CAFile: filepath.Join(t.TempDir(), "fake-internet-ca.pem"),
		cert: tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}}
	up.Roots.AddCert(ca)
	if err := os.WriteFile(up.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return up
}

// CAPEM is its CA in PEM, as a request names it (egressProxy.tls.caCert).
func (u *Upstream) CAPEM(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(u.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Serve serves h over HTTPS at InternetAddr:443 in the fake internet ns
// until the test ends.
func (u *Upstream) Serve(t testing.TB, ns netns.NsHandle, h http.Handler) {
	t.Helper()
	ln, err := ListenIn(ns, InternetAddr+":443")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), TLSConfig: &tls.Config{Certificates: []tls.Certificate{u.cert}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
}
