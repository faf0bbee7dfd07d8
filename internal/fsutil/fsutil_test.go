package fsutil

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestCopyTreeOpaque: a build step's upper marks the directories it made
// over nothing opaque in the trusted namespace; a user.overlay.opaque there
// came up with a lower layer's directory and must not make the copy hide
// the lower layers.
func TestCopyTreeOpaque(t *testing.T) {
	testkit.NeedRoot(t, "trusted.* attributes need root")
	src := t.TempDir()
	for _, tc := range []struct{ dir, xattr string }{{"made", "trusted.overlay.opaque"}, {"copied-up", "user.overlay.opaque"}, {"plain", ""}} {
		p := filepath.Join(src, tc.dir)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if tc.xattr != "" {
			if err := unix.Lsetxattr(p, tc.xattr, []byte("y"), 0); err != nil {
				t.Skipf("set %s here: %v", tc.xattr, err)
			}
		}
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if err := CopyTree(src, dst, CopyOptions{Overlay: true}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	for _, tc := range []struct {
		dir    string
		opaque bool
	}{{"made", true}, {"copied-up", false}, {"plain", false}} {
		for _, x := range opaqueXattrs {
			_, err := unix.Lgetxattr(filepath.Join(dst, tc.dir), x, buf)
			if got := err == nil; got != tc.opaque {
				t.Errorf("%s: %s set %v, want %v", tc.dir, x, got, tc.opaque)
			}
		}
	}
}
