package security

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSharedResourcesNameRealTests keeps docs/SECURITY.md's "Shared
// resources" table true: it has a row for every resource the node
// shares, and every test a row names exists.
func TestSharedResourcesNameRealTests(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Shared resources\n")
	if !ok {
		t.Fatal("docs/SECURITY.md has no section Shared resources")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var firstCells []string // each row's resource
	for _, line := range strings.Split(section, "\n") {
		if cells := strings.Split(line, " | "); strings.HasPrefix(line, "| ") && len(cells) > 1 {
			firstCells = append(firstCells, cells[0])
		}
	}
	for _, resource := range []string{"descriptors of the server process", "connections not yet authenticated",
		"egress proxy", "memory of the server process", "threads of the server process", "disk while unpacking",
		"snapshots", "database rows", "build slots", "build logs", "webhook delivery slots", "addresses the server connects to"} {
		if !slices.ContainsFunc(firstCells, func(c string) bool { return strings.Contains(c, resource) }) {
			t.Errorf("the Shared resources table has no row for %q", resource)
		}
	}
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "../..":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`(Test\\w+)`").FindAllStringSubmatch(section, -1)
	if len(named) < 20 {
		t.Fatalf("the table names %d tests: the pattern no longer matches it", len(named))
	}
	for _, m := range named {
		if !defined[m[1]] {
			t.Errorf("the Shared resources table names %s, which no test file defines", m[1])
		}
	}
}
