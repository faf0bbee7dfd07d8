package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
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
