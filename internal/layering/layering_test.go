// Package layering holds the tests of which of Cove's packages may import
// which: the house's arrows point down.
package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/covesandbox/cove/"

// deps are the packages that the packages matching pattern, their tests
// included, import directly or not (module-relative paths).
func deps(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-test", "-deps", "-f", "{{.ImportPath}}", pattern).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pattern, err, out)
	}
	var in []string
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok {
			in = append(in, rest)
		}
	}
	return in
}

// under reports whether package p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// TestNoDriverImportsAnother keeps the isolation drivers apart: what all
// of them put inside a sandbox is package inside's, and none reaches into
// another (a driver's own packages, such as microvm/guest, are its own;
// their tests count).
func TestNoDriverImportsAnother(t *testing.T) {
	drivers := []string{"internal/isolation/namespaces", "internal/isolation/gvisor", "internal/isolation/microvm"}
	for _, d := range drivers {
		for _, dep := range deps(t, "../../"+d+"/...") {
			for _, other := range drivers {
				if other != d && under(dep, other) {
					t.Errorf("driver %s imports driver %s (%s)", d, other, dep)
				}
			}
		}
	}
}

// TestNodeSideBelowControlPlane: a node (its manager, its API, the
// drivers, networks, templates, the agent) imports nothing of the
// control plane, which calls it; what both sides need (the tokens derived
// from the cluster's secret) lives below both.
func TestNodeSideBelowControlPlane(t *testing.T) {
	for _, p := range []string{"internal/node", "internal/nodeapi", "internal/isolation", "internal/network",
		"internal/template", "internal/envd", "internal/volume", "internal/tokens", "cmd/cove-sandbox"} {
		for _, dep := range deps(t, "../../"+p+"/...") {
			if under(dep, "internal/controlplane") {
				t.Errorf("%s imports the control plane (%s)", p, dep)
			}
		}
	}
}

// TestFakeNodeInTestsOnly: the fake node (nodefake) is for tests: no
// package but a test imports it, so no binary links it.
func TestFakeNodeInTestsOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		if slices.Contains(strings.Fields(imports), module+"internal/nodefake") {
			t.Errorf("%s imports internal/nodefake", pkg)
		}
	}
}
