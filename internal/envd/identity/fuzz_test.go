package identity

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExpandPath: whatever path a request names, the agent works on an
// absolute, clean path (no "..", no empty or "." elements, no NUL), and
// relative paths land under their base unless they climb out with "..".
func FuzzExpandPath(f *testing.F) {
	f.Add("0", "/\x00")
	for _, s := range []string{"", "~", "~/x", "~user", "a/../../..", "/etc/../etc/passwd", ".", "..", "a\x00b", "//x//y/", "~/../../root", "./-rf"} {
		f.Add(s, "")
		f.Add(s, "/home/user/project")
	}
	u := User{Name: "user", UID: 1000, GID: 1000, Home: "/home/user"}
	f.Fuzz(func(t *testing.T, p, base string) {
		if base != "" && !filepath.IsAbs(base) {
			return // bases come from the agent (a workdir), always absolute
		}
		got, err := ExpandPath(u, p, base)
		if err != nil {
			if p != "" && !strings.ContainsRune(p+base, 0) {
				t.Fatalf("ExpandPath(%q, %q): %v", p, base, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.ContainsRune(got, 0) {
			t.Fatalf("ExpandPath(%q, %q) = %q: not absolute and clean", p, base, got)
		}
		root := base
		if root == "" || strings.HasPrefix(p, "~") {
			root = u.Home
		}
		if !filepath.IsAbs(p) && !strings.Contains(p, "..") && !strings.HasPrefix(p, "~") && got != filepath.Clean(root) && !strings.HasPrefix(got, filepath.Clean(root)+"/") && filepath.Clean(root) != "/" {
			t.Fatalf("ExpandPath(%q, %q) = %q: left its base", p, base, got)
		}
	})
}
