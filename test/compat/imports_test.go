package compat

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/template"
	cove "github.com/covesandbox/cove/sdk/go"
)

// importsCode imports each of code-interpreter-v1's Python packages
// (template.CodeInterpreterPython) and prints which it could.
func importsCode() string {
	var mods []string
	for _, p := range template.CodeInterpreterPython {
		mods = append(mods, `"`+p.Module+`"`)
	}
	return "import importlib, json\nfound = {}\nfor m in [" + strings.Join(mods, ", ") + "]:\n" +
		"    try:\n        importlib.import_module(m)\n        found[m] = True\n" +
		"    except ImportError:\n        found[m] = False\nprint(json.dumps(found))\n"
}

// checkImports: a code interpreter sandbox of tpl, built over the host's
// /usr as the tests build it, imports exactly the packages of
// code-interpreter-v1's list that the host's Python imports (the real
// recipe installs them all from PyPI; tests reach no archive).
func checkImports(t *testing.T, addr, tpl string) {
	t.Helper()
	ctx := context.Background()
	host, err := exec.Command("/usr/bin/python3", "-c", importsCode()).Output() // the Python the sandbox sees
	if err != nil {
		t.Fatalf("the host's imports: %v", err)
	}
	var want map[string]bool
	if err := json.Unmarshal(host, &want); err != nil {
		t.Fatalf("the host's imports: %q: %v", host, err)
	}
	url := "http://" + addr
	c, err := cove.NewClient(cove.WithAPIURL(url), cove.WithSandboxURL(url), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := c.Create(ctx, cove.CreateOptions{Template: tpl})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(ctx)
	exe, err := sbx.Code.RunCode(ctx, importsCode(), cove.RunCodeOptions{})
	if err != nil || exe.Error != nil || len(exe.Logs.Stdout) != 1 {
		t.Fatalf("imports in the sandbox: %v %+v", err, exe)
	}
	var got map[string]bool
	if err := json.Unmarshal([]byte(exe.Logs.Stdout[0]), &got); err != nil {
		t.Fatalf("imports in the sandbox: %q: %v", exe.Logs.Stdout[0], err)
	}
	n := 0
	for _, p := range template.CodeInterpreterPython {
		if got[p.Module] != want[p.Module] {
			t.Errorf("import %s: %v in the sandbox, %v on the host", p.Module, got[p.Module], want[p.Module])
		}
		if got[p.Module] {
			n++
		}
	}
	t.Logf("the sandbox imports %d of code-interpreter-v1's %d Python packages, as the host does", n, len(template.CodeInterpreterPython))
}
