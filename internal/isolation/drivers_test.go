package isolation

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoDriverImportsAnother keeps the drivers apart: what all of them put
// inside a sandbox is package inside's, and none reaches into another
// (a driver's own packages, such as microvm/guest, are its own; their
// tests count).
func TestNoDriverImportsAnother(t *testing.T) {
	const prefix = "github.com/covesandbox/cove/internal/isolation/"
	drivers := []string{"namespaces", "gvisor", "microvm"}
	for _, d := range drivers {
		out, err := exec.Command("go", "list", "-test", "-deps", "-f", "{{.ImportPath}}", "./"+d+"/...").CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", d, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			rest, ok := strings.CutPrefix(dep, prefix)
			if !ok {
				continue
			}
			for _, other := range drivers {
				if other != d && (rest == other || strings.HasPrefix(rest, other+"/")) {
					t.Errorf("driver %s imports driver %s (%s)", d, other, dep)
				}
			}
		}
	}
}
