package template

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/ociimage"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestCoveImage writes Cove's container image (make image's, over a small
// root file system of the test's) and loads it as a template build loads
// an OCI layout: the tag picks it, its layers unpack, and they hold the
// root file system as it was (modes, owners, links) and the binaries in
// /usr/local/bin, byte for byte, with cove as its entry point.
func TestCoveImage(t *testing.T) {
	testkit.NeedRoot(t, "owners need root")
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "../../bin")
	var bins []string
	for _, name := range []string{"cove", "cove-sandbox"} {
		p := filepath.Join(bin, name)
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is missing: make build", p)
		}
		bins = append(bins, p)
	}
	rootfs := t.TempDir()
	os.MkdirAll(filepath.Join(rootfs, "etc"), 0o755)
	os.MkdirAll(filepath.Join(rootfs, "home/user"), 0o750)
	os.WriteFile(filepath.Join(rootfs, "etc/os-release"), []byte("ID=debian\n"), 0o644)
	os.Symlink("/usr/bin/python3", filepath.Join(rootfs, "etc/python"))
	os.Chown(filepath.Join(rootfs, "home/user"), 1000, 1000)
	os.WriteFile(filepath.Join(rootfs, "etc/shadow"), []byte("root:*:1::::::\n"), 0o640)

	out := filepath.Join(t.TempDir(), "image")
	if err := ociimage.Write(out, ociimage.Spec{RootFS: rootfs, Binaries: bins, Tag: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := ociimage.Write(out, ociimage.Spec{Binaries: bins}); err == nil {
		t.Error("an image was written over an existing directory")
	}
	img, err := openImage(context.Background(), "oci:"+out+":v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := Layers{dir: t.TempDir()}
	names, cfg, err := l.importImage(context.Background(), img, nil, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != "/usr/local/bin/cove" {
		t.Fatalf("layers %v, entry point %v", names, cfg.Entrypoint)
	}
	root, binLayer := l.Path(names[0]), l.Path(names[1])
	for _, c := range []struct {
		path  string
		mode  os.FileMode
		owner uint64
	}{
		{"etc/os-release", 0o644, 0},
		{"etc/shadow", 0o640, 0},
		{"home/user", os.ModeDir | 0o750, 1000<<32 | 1000},
	} {
		st, err := os.Lstat(filepath.Join(root, c.path))
		if err != nil {
			t.Errorf("%s: %v", c.path, err)
			continue
		}
		if st.Mode() != c.mode || fsutil.Owner(st) != c.owner {
			t.Errorf("%s: %v owned %x, want %v owned %x", c.path, st.Mode(), fsutil.Owner(st), c.mode, c.owner)
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "etc/python")); err != nil || target != "/usr/bin/python3" {
		t.Errorf("the link: %q %v", target, err)
	}
	for _, p := range bins {
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(binLayer, "usr/local/bin", filepath.Base(p)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the image differs (%v)", filepath.Base(p), err)
		}
		if st, err := os.Stat(filepath.Join(binLayer, "usr/local/bin", filepath.Base(p))); err != nil || st.Mode() != 0o755 {
			t.Errorf("%s's mode: %v %v", filepath.Base(p), st.Mode(), err)
		}
	}
}
