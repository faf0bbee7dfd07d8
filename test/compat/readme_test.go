package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runReadmeSnippet runs the README's JavaScript block marked
// `<!-- readme:<name> -->` with env (the SDK's variables) and checks that
// it prints what its `// …` comments say. The one change: its
// Sandbox.create() gets tpl, the template the suite built over base as
// the built-in one is built (code-interpreter-v1 and desktop are built
// from Debian's archive, minutes of downloads, on first use).
func runReadmeSnippet(t *testing.T, env []string, name, tpl string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- readme:"+name+" -->\n```js\n")
	if !ok {
		t.Fatalf("README.md has no %s snippet", name)
	}
	snippet, _, _ := strings.Cut(rest, "```")
	var want []string
	for _, m := range regexp.MustCompile(`console\.log\(.*\)\s+// (.*)`).FindAllStringSubmatch(snippet, -1) {
		want = append(want, m[1])
	}
	if !strings.Contains(snippet, "Sandbox.create()") {
		t.Fatalf("the snippet no longer calls Sandbox.create(): %s", snippet)
	}
	snippet = strings.Replace(snippet, "Sandbox.create()", "Sandbox.create("+`"`+tpl+`"`+")", 1)
	file := filepath.Join(".", "readme-"+name+".tmp.mjs") // beside node_modules
	if err := os.WriteFile(file, []byte(snippet), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	cmd := exec.Command("node", file)
	cmd.Env = nodeEnv(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's snippet: %v\n%s", err, out)
	}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the README's snippet printed %q, its comments say %q", got, want)
	}
}
