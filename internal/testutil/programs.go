package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ProgramsRoot makes a root file system of the host's programs (from
// /usr/bin) and the libraries they link, with /bin/sh (dash, when listed),
// the accounts root and user, /tmp, /root and /home/user: a template root
// of its own, with no host directory bound into it.
func ProgramsRoot(t *testing.T, programs ...string) string {
	t.Helper()
	root := t.TempDir()
	copyFile := func(src, dst string, mode os.FileMode) {
		b, err := os.ReadFile(src)
		if err == nil {
			err = os.MkdirAll(filepath.Dir(dst), 0o755)
		}
		if err == nil {
			err = os.WriteFile(dst, b, mode)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range programs {
		bin := filepath.Join("/usr/bin", p)
		copyFile(bin, filepath.Join(root, bin), 0o755)
		out, err := exec.Command("ldd", bin).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", bin, err)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				copyFile(f, filepath.Join(root, f), 0o755)
			}
		}
		if p == "dash" {
			if err := os.Symlink("dash", filepath.Join(root, "usr/bin/sh")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, dir := range []string{"etc", "tmp", "root", "home/user", "proc", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n",
		"etc/group":  "root:x:0:\nuser:x:1000:\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(root, "home/user"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	return root
}
