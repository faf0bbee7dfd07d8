package envd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
)

// TestWriteResolvers: the nameservers replace resolv.conf; a link there
// is replaced, never written through; what is not an address is refused.
func TestWriteResolvers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "resolv.conf")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := writeResolvers(path, []string{"203.0.113.1", "198.51.100.53"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "nameserver 203.0.113.1\nnameserver 198.51.100.53\n" {
		t.Errorf("resolv.conf: %q", got)
	}
	if got, _ := os.ReadFile(target); string(got) != "kept\n" {
		t.Errorf("the link's target was written: %q", got)
	}
	for _, bad := range [][]string{{"203.0.113.1\nnameserver 10.0.0.1"}, {"resolver.test"}, make([]string, maxResolvers+1)} {
		if err := writeResolvers(path, bad); !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("%q: %v, want refused", bad, err)
		}
	}
	if got, _ := os.ReadFile(path); string(got) != "nameserver 203.0.113.1\nnameserver 198.51.100.53\n" {
		t.Errorf("a refused write changed resolv.conf: %q", got)
	}
}
