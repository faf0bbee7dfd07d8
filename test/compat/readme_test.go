package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/testutil"
)

// snippetLanguages are the README's languages whose snippets the suite
// runs: the fence's name, the comment that says what a line prints, and
// the file the snippet is saved as (beside node_modules, or in the
// Python suite's folder).
var snippetLanguages = map[string]struct {
	printed *regexp.Regexp
	file    string
}{
	"js":     {regexp.MustCompile(`console\.log\(.*\)\s+// (.*)`), "%s.tmp.mjs"},
	"python": {regexp.MustCompile(`print\(.*\)\s+# (.*)`), "py/%s.tmp.py"},
}

// runReadmeSnippet runs the README's block marked `<!-- readme:<name> -->`
// (JavaScript or Python) with env (the SDK's variables) and checks that
// it prints what its comments say. The one change: its Sandbox.create()
// gets tpl, the template the suite built over base as the built-in one
// is built (code-interpreter-v1 and desktop are built from Debian's
// archive, minutes of downloads, on first use).
func runReadmeSnippet(t *testing.T, env []string, name, tpl string) {
	t.Helper()
	runDocSnippet(t, env, "../../README.md", "readme:"+name, func(snippet string) string {
		if !strings.Contains(snippet, "Sandbox.create()") {
			t.Fatalf("the snippet no longer calls Sandbox.create(): %s", snippet)
		}
		return strings.Replace(snippet, "Sandbox.create()", "Sandbox.create("+`"`+tpl+`"`+")", 1)
	})
}

// runDocSnippet runs doc's block marked `<!-- name -->` (JavaScript or
// Python) with env, changed by edit when set, and checks that it prints
// what its comments say.
func runDocSnippet(t *testing.T, env []string, doc, name string, edit func(string) string) {
	t.Helper()
	lang, snippet := testutil.DocBlock(t, doc, name)
	how, ok := snippetLanguages[lang]
	if !ok {
		t.Fatalf("%s's %s snippet is in %q, which the suite does not run", doc, name, lang)
	}
	var want []string
	for _, m := range how.printed.FindAllStringSubmatch(snippet, -1) {
		want = append(want, m[1])
	}
	if edit != nil {
		snippet = edit(snippet)
	}
	file := filepath.FromSlash(strings.Replace(how.file, "%s", strings.ReplaceAll(name, ":", "-"), 1))
	if err := os.WriteFile(file, []byte(snippet), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	cmd := exec.Command("node", file)
	if lang == "python" {
		cmd = exec.Command(venvPython, file)
	}
	cmd.Env = nodeEnv(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s's %s snippet: %v\n%s", doc, name, err, out)
	}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s's %s snippet printed %q, its comments say %q", doc, name, got, want)
	}
}
