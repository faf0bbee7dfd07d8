package localca

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLoadAndIssue: a CA made in a directory is the one loaded from it
// later, its key the owner's alone; what it issues verifies for its names
// (DNS and IP) against it, and for no other name.
func TestLoadAndIssue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	made, err := Load(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	if !made.Cert.Equal(loaded.Cert) || string(made.PEM) != string(loaded.PEM) {
		t.Error("the CA loaded is not the one made")
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, keyFile): 0o600, filepath.Join(dir, CertFile): 0o644} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %o", path, fi.Mode(), err, want)
		}
	}
	cert, err := loaded.Issue([]string{"api.example.test", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(made.Cert)
	for name, ok := range map[string]bool{"api.example.test": true, "127.0.0.1": true, "other.example.test": false} {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		if (err == nil) != ok {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	other, err := Load("", "in memory")
	if err != nil {
		t.Fatal(err)
	}
	if other.Cert.Equal(made.Cert) {
		t.Error("a CA in memory is the directory's")
	}
}
