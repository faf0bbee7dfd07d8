package layering

import (
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// architecture is docs/ARCHITECTURE.md, or the part of it under heading
// (up to the next one of its level).
func architecture(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, part, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/ARCHITECTURE.md has no %q", heading)
	}
	part, _, _ = strings.Cut(part, "\n## ")
	return part
}

// TestArchitectureMapsEveryPackage: the map's table of packages has a row
// for every package of cmd/ and internal/, and names no package that is
// not there.
func TestArchitectureMapsEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "../../cmd/...", "../../internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, module))
	}
	mapped := map[string]bool{}
	name := regexp.MustCompile("`((?:cmd|internal)/[a-z0-9/-]+)`")
	for _, row := range strings.Split(architecture(t, "## The packages"), "\n") {
		cols := strings.Split(row, "|")
		if len(cols) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cols[1], -1) {
			mapped[m[1]] = true
			if !slices.Contains(pkgs, m[1]) {
				t.Errorf("docs/ARCHITECTURE.md maps %s, which is no package", m[1])
			}
		}
	}
	for _, p := range pkgs {
		if !mapped[p] {
			t.Errorf("docs/ARCHITECTURE.md's packages have no row for %s", p)
		}
	}
}

// TestArchitectureNamesTheContracts: the map names every call of the node
// contract and of the isolation driver, and every optional interface a
// driver may implement.
func TestArchitectureNamesTheContracts(t *testing.T) {
	for heading, names := range map[string][]string{
		"## The node contract":      methods(reflect.TypeFor[sandboxes.Node]()),
		"## The isolation contract": append(methods(reflect.TypeFor[isolation.Driver]()), interfaceNames(optional)...),
	} {
		part := architecture(t, heading)
		for _, n := range names {
			if !strings.Contains(part, "`"+n+"`") {
				t.Errorf("docs/ARCHITECTURE.md's %q does not name `%s`", heading, n)
			}
		}
	}
}

func methods(iface reflect.Type) []string {
	var out []string
	for i := range iface.NumMethod() {
		out = append(out, iface.Method(i).Name)
	}
	return out
}

func interfaceNames(types []reflect.Type) []string {
	var out []string
	for _, t := range types {
		out = append(out, t.Name())
	}
	return out
}
