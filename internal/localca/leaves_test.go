package localca

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLeaves: a certificate made for a host names that host alone (no
// wildcard, which OpenSSL refuses directly under "localhost"), verifies
// for it against the CA and for no other host, and is kept: asked again,
// it is the same one.
func TestLeaves(t *testing.T) {
	t.Parallel()
	ca, err := Load("", "test CA")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	leaves, err := ca.Leaves(8, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, other string }{
		{"8080-i0123456789abcdefghi.localhost", "8081-i0123456789abcdefghi.localhost"},           // the default mode
		{"8080-i0123456789abcdefghi.cove.localhost", "8080-i0123456789abcdefghj.cove.localhost"}, // domain mode
		{"49983-iabc.sandbox.example.com", "api.sandbox.example.com"},
	} {
		cert, err := leaves.Get(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cert.Leaf.DNSNames, []string{tc.name}) || len(cert.Leaf.IPAddresses) != 0 {
			t.Errorf("%s: the certificate names %v %v", tc.name, cert.Leaf.DNSNames, cert.Leaf.IPAddresses)
		}
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: tc.name, Roots: roots}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: tc.other, Roots: roots}); err == nil {
			t.Errorf("%s's certificate verifies for %s", tc.name, tc.other)
		}
		if len(cert.Certificate) != 2 || string(cert.Certificate[1]) != string(ca.Cert.Raw) {
			t.Errorf("%s: the chain does not end with the CA", tc.name)
		}
		if again, err := leaves.Get(tc.name); err != nil || again != cert {
			t.Errorf("%s asked again: another certificate (%v)", tc.name, err)
		}
	}
	if n := leaves.Len(); n != 3 {
		t.Errorf("%d certificates kept, want 3", n)
	}
}

// TestLeavesBounded: past its bound the cache keeps the most recently
// asked for names and makes the others again when asked; a certificate
// half way through its validity is made again.
func TestLeavesBounded(t *testing.T) {
	t.Parallel()
	ca, err := Load("", "test CA")
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := ca.Leaves(4, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tls.Certificate{}
	name := func(i int) string { return fmt.Sprintf("%d-isandbox.localhost", 8000+i) }
	for i := range 100 {
		c, err := leaves.Get(name(i))
		if err != nil {
			t.Fatal(err)
		}
		got[name(i)] = c
		if n := leaves.Len(); n > 4 {
			t.Fatalf("%d certificates kept after %d names, want at most 4", n, i+1)
		}
	}
	if _, err := leaves.Get(name(96)); err != nil { // the least recent of the four becomes the most recent
		t.Fatal(err)
	}
	if got[name(100)], err = leaves.Get(name(100)); err != nil { // and 97 goes
		t.Fatal(err)
	}
	kept := func(n string) *tls.Certificate {
		leaves.mu.Lock()
		defer leaves.mu.Unlock()
		if e, ok := leaves.byName[n]; ok {
			return e.Value.(*leaf).cert
		}
		return nil
	}
	for i := range 101 {
		c, want := kept(name(i)), i == 96 || i >= 98
		if (c != nil) != want || want && c != got[name(i)] {
			t.Errorf("%s kept: %v, want %v", name(i), c != nil, want)
		}
	}
	if c, err := leaves.Get(name(0)); err != nil || c == got[name(0)] || leaves.Len() != 4 {
		t.Errorf("a name that went, asked again: the same certificate or %d kept (%v)", leaves.Len(), err)
	}

	// Clients at once (-race), half asking for one name, half for ten: the
	// bound holds.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if _, err := leaves.Get(name(i * (g % 2))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := leaves.Len(); n != 4 {
		t.Errorf("%d certificates kept by clients at once, want 4", n)
	}

	short, err := ca.Leaves(4, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, err := short.Get(name(0))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := short.Get(name(0)); err != nil || again == first || short.Len() != 1 {
		t.Errorf("a certificate past half its validity is kept (%v, %d kept)", err, short.Len())
	}
}
