package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/gvisor"
	"github.com/covesandbox/cove/internal/isolation/microvm"
	"github.com/covesandbox/cove/internal/isolation/namespaces"
)

// optional are the isolation contract's optional interfaces: the node
// asks a driver for each by a type assertion.
var optional = []reflect.Type{
	reflect.TypeFor[isolation.Lister](), reflect.TypeFor[isolation.Outdater](), reflect.TypeFor[isolation.Stater](),
	reflect.TypeFor[isolation.AgentLogger](), reflect.TypeFor[isolation.HandOverer](), reflect.TypeFor[isolation.Pauser](),
	reflect.TypeFor[isolation.LayerSaver](), reflect.TypeFor[isolation.Checkpointer](), reflect.TypeFor[isolation.Cloner](),
	reflect.TypeFor[isolation.Resizer](),
}

// TestDriversPinTheirInterfaces: a driver that has a method of an
// optional interface implements all of the interface (a signature that
// drifted would turn the feature into Unimplemented without a word), and
// pins each one it implements with `var _ isolation.X = (*Driver)(nil)`,
// so that such a drift fails to compile.
func TestDriversPinTheirInterfaces(t *testing.T) {
	for dir, d := range map[string]reflect.Type{
		"internal/isolation/namespaces": reflect.TypeFor[*namespaces.Driver](),
		"internal/isolation/gvisor":     reflect.TypeFor[*gvisor.Driver](),
		"internal/isolation/microvm":    reflect.TypeFor[*microvm.Driver](),
	} {
		pinned := pins(t, "../../"+dir)
		for _, iface := range optional {
			if d.Implements(iface) {
				if !pinned[iface.Name()] {
					t.Errorf("%s implements isolation.%s without a var _ pin", dir, iface.Name())
				}
				continue
			}
			for i := range iface.NumMethod() {
				if _, ok := d.MethodByName(iface.Method(i).Name); ok {
					t.Errorf("%s has %s of isolation.%s but does not implement it", dir, iface.Method(i).Name, iface.Name())
				}
			}
		}
	}
}

// pins are the interfaces of package isolation that dir's non-test files
// assert (*Driver)(nil) to be, by name.
func pins(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || len(spec.Names) != 1 || spec.Names[0].Name != "_" {
				return true
			}
			sel, ok := spec.Type.(*ast.SelectorExpr)
			if pkg, isIdent := selX(sel); ok && isIdent && pkg == "isolation" && len(spec.Values) == 1 &&
				strings.Contains(string(src[fset.Position(spec.Values[0].Pos()).Offset:fset.Position(spec.Values[0].End()).Offset]), "(*Driver)(nil)") {
				out[sel.Sel.Name] = true
			}
			return true
		})
	}
	return out
}

// selX is the package name of a selector such as isolation.Pauser.
func selX(sel *ast.SelectorExpr) (string, bool) {
	if sel == nil {
		return "", false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", false
	}
	return id.Name, true
}

// TestGlossaryNamesExist: every name of the code that docs/ARCHITECTURE.md's
// glossary gives (sandboxes.X, node.X, template.X, service.X, or X.Y of
// the contract's package or the node's)
// is in the code, so a rename fails until the glossary follows.
func TestGlossaryNamesExist(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, glossary, ok := strings.Cut(string(doc), "## Glossary\n")
	glossary, _, _ = strings.Cut(glossary, "\n## ")
	if !ok {
		t.Fatal("docs/ARCHITECTURE.md has no glossary")
	}
	pkgs := map[string]string{"sandboxes": "internal/sandboxes", "node": "internal/node", "template": "internal/template", "service": "internal/controlplane/service", "isolation": "internal/isolation"}
	names := 0
	for _, row := range strings.Split(glossary, "\n") {
		cols := strings.Split(row, "|")
		if len(cols) < 4 {
			continue
		}
		for _, part := range strings.Split(cols[2], "`") {
			first, rest, ok := strings.Cut(part, ".")
			if !ok || strings.ContainsAny(part, " /_") {
				continue
			}
			in, sym := []string{pkgs[first]}, rest
			if in[0] == "" { // Info.Rest, Manager.shareFiles: the contract's or the node's
				in, sym = []string{"internal/sandboxes", "internal/node"}, part
			}
			names++
			var out []byte
			for _, pkg := range in {
				if out, err = exec.Command("go", "doc", "-u", module+pkg, sym).CombinedOutput(); err == nil {
					break
				}
			}
			if err != nil {
				t.Errorf("the glossary names %s, which %s lacks: %s", part, strings.Join(in, " and "), out)
			}
		}
	}
	if names < 10 {
		t.Errorf("the glossary names %d things of the code", names)
	}
}
