package template

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMergeLayer stacks an upper onto a stored layer the way overlayfs
// would show them, and the result is checked against its manifest.
func TestMergeLayer(t *testing.T) {
	s := newStore(t)
	build := func(files map[string]string) string {
		t.Helper()
		stage, err := s.StageLayer()
		if err != nil {
			t.Fatal(err)
		}
		for p, v := range files {
			full := filepath.Join(stage, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			switch {
			case v == "<whiteout>":
				err = unix.Mknod(full, unix.S_IFCHR, 0)
			case v == "<opaque>":
				if err = os.Mkdir(full, 0o700); err == nil {
					err = unix.Setxattr(full, "trusted.overlay.opaque", []byte("y"), 0)
				}
			case strings.HasPrefix(v, "->"):
				err = os.Symlink(strings.TrimPrefix(v, "->"), full)
			case strings.HasSuffix(p, "/"):
				err = os.MkdirAll(full, 0o755)
			default:
				err = os.WriteFile(full, []byte(v), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return stage
	}
	lower, err := s.CommitLayer(build(map[string]string{
		"keep": "k", "change": "old", "gone": "g", "dir/a": "a", "dir/b": "b", "replaced/x": "x", "was-file": "f",
		"hidden": "<whiteout>",
	}))
	if err != nil {
		t.Fatal(err)
	}
	merged, err := s.MergeLayer(lower.Name, build(map[string]string{
		"change": "new", "gone": "<whiteout>", "dir/b": "B", "dir/c": "c", "replaced": "<opaque>", "was-file": "->keep",
		"hidden": "back",
	}))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.CommitLayer(merged, lower.Name)
	if err != nil {
		t.Fatal(err)
	}
	root := s.LayerPath(sum.Name)
	for path, want := range map[string]string{
		"keep": "k", "change": "new", "dir/a": "a", "dir/b": "B", "dir/c": "c", "hidden": "back",
	} {
		if got, err := os.ReadFile(filepath.Join(root, path)); err != nil || string(got) != want {
			t.Errorf("%s: %q %v, want %q", path, got, err, want)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(root, "gone"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("gone is no whiteout: %v", err)
	}
	if entries, err := os.ReadDir(filepath.Join(root, "replaced")); err != nil || len(entries) != 0 || !opaqueDir(filepath.Join(root, "replaced")) {
		t.Errorf("replaced: %v %v, want an empty opaque directory", entries, err)
	}
	if target, err := os.Readlink(filepath.Join(root, "was-file")); err != nil || target != "keep" {
		t.Errorf("was-file: %q %v", target, err)
	}
	if err := s.VerifyLayer(sum); err != nil {
		t.Error(err)
	}
	if sum.Name == lower.Name {
		t.Error("the merged layer took the lower's name")
	}
}
