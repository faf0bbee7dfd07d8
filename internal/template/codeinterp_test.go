package template

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestCodeInterpreterPython: recipes/code-interpreter.in asks for exactly
// CodeInterpreterPython's packages at their versions (what the
// compatibility suite imports is what the recipe installs), the lock pins
// each at such a version with the hashes pip checks, and the recipe's pip
// step installs the lock.
func TestCodeInterpreterPython(t *testing.T) {
	in, err := os.ReadFile("recipes/code-interpreter.in")
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(in)), "\n") {
		dist, version, _ := strings.Cut(line, "==")
		asked[dist] = strings.TrimSuffix(version, ".*")
	}
	pinned := map[string]string{}
	for _, entry := range strings.Split(codeInterpreterLock, "\n") {
		if entry == "" || entry[0] == ' ' {
			continue
		}
		dist, rest, ok := strings.Cut(entry, "==")
		if !ok {
			t.Fatalf("lock line %q pins no version", entry)
		}
		pinned[dist] = strings.Fields(rest)[0]
	}
	if n := strings.Count(codeInterpreterLock, "--hash=sha256:"); n < len(pinned) {
		t.Errorf("the lock has %d hashes for %d packages", n, len(pinned))
	}
	if len(asked) != len(CodeInterpreterPython) {
		t.Errorf("code-interpreter.in asks for %d packages, CodeInterpreterPython lists %d", len(asked), len(CodeInterpreterPython))
	}
	for _, p := range CodeInterpreterPython {
		if v, ok := asked[p.Dist]; !ok || v != p.Version {
			t.Errorf("code-interpreter.in asks for %s at %q (listed: %v), want %q", p.Dist, v, ok, p.Version)
		}
		if v := pinned[p.Dist]; v == "" || p.Version != "" && v != p.Version && !strings.HasPrefix(v, p.Version+".") {
			t.Errorf("the lock pins %s at %q, want %s", p.Dist, v, p.Version)
		}
	}
	// The recipe's pip steps install every entry of the lock, once.
	installed := map[string]int{}
	for _, s := range Recipes["code-interpreter-v1"].Steps {
		if s.Type == "RUN" && strings.Contains(s.Args[0], "pip install") {
			for _, e := range lockEntries(s.Args[0][strings.Index(s.Args[0], "\n")+1 : strings.Index(s.Args[0], "EOF\n")]) {
				installed[e]++
			}
		}
	}
	entries := lockEntries(codeInterpreterLock)
	if len(entries) != len(pinned) || len(installed) != len(entries) {
		t.Errorf("the pip steps install %d entries, the lock has %d (%d packages)", len(installed), len(entries), len(pinned))
	}
	for _, e := range entries {
		if installed[e] != 1 {
			t.Errorf("the pip steps install %q %d times", e, installed[e])
		}
	}
	if d := Recipes["code-interpreter-v1"].FromDebootstrap; d == nil || d.Suite != "trixie" {
		t.Errorf("code-interpreter-v1 is not made from Debian 13 (Python 3.13): %+v", d)
	}
}

// TestGuideListsCodeInterpreterPython: docs/GUIDE.md's "What
// code-interpreter-v1 holds" names every package of CodeInterpreterPython
// and gives their counts and the lock's as they are.
func TestGuideListsCodeInterpreterPython(t *testing.T) {
	guide, err := os.ReadFile("../../docs/GUIDE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(guide), "\n## What `code-interpreter-v1` holds\n")
	if !ok {
		t.Fatal("GUIDE.md has no section \"What `code-interpreter-v1` holds\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section = strings.Join(strings.Fields(section), " ")
	for _, p := range CodeInterpreterPython {
		if !regexp.MustCompile(`(^|[\s(—])` + regexp.QuoteMeta(p.Dist) + `[\s,)]`).MatchString(section) {
			t.Errorf("GUIDE.md does not name %s", p.Dist)
		}
	}
	for _, figure := range []string{
		fmt.Sprintf("E2B's %d packages", len(CodeInterpreterE2B)),
		fmt.Sprintf("Cove adds %d packages", len(CodeInterpreterAdded)),
		fmt.Sprintf("Each of the %d imports", len(CodeInterpreterPython)),
		fmt.Sprintf("pins all %d packages", len(lockEntries(codeInterpreterLock))),
	} {
		if !strings.Contains(section, figure) {
			t.Errorf("GUIDE.md does not say %q", figure)
		}
	}
}
