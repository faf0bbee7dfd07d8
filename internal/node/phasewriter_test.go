package node_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnePhaseWriter: no code of the node but lifecycle.go's doors
// (transition, transitioned, recordAs, killing) and its reading of old
// records sets a record's State or Rest; a sandbox being created is marked
// creating, which is never recorded.
func TestOnePhaseWriter(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "lifecycle.go" {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok {
				return true
			}
			for i, lhs := range as.Lhs {
				sel, ok := lhs.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "State" && sel.Sel.Name != "Rest" {
					continue
				}
				if len(as.Rhs) == len(as.Lhs) {
					if id, ok := as.Rhs[i].(*ast.Ident); ok && id.Name == "StateCreating" {
						continue
					}
				}
				t.Errorf("%s: sets %s outside lifecycle.go's transition", fset.Position(as.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
