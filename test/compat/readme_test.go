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
// `<!-- readme:code-interpreter -->` against the server at addr and checks
// that it prints what its `// …` comments say. The one change: its
// Sandbox.create() gets the template the suite built over base with the
// code interpreter's start command, since code-interpreter-v1 is built
// from Debian's archive (minutes of downloads) on first use.
func runReadmeSnippet(t *testing.T, addr, tpl string) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- readme:code-interpreter -->\n```js\n")
	if !ok {
		t.Fatal("README.md has no code-interpreter snippet")
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
	file := filepath.Join(".", "readme-snippet.tmp.mjs") // beside node_modules
	if err := os.WriteFile(file, []byte(snippet), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	cmd := exec.Command("node", file)
	cmd.Env = append(os.Environ(), "E2B_API_URL=http://"+addr, "E2B_SANDBOX_URL=http://"+addr, "E2B_API_KEY="+apiKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's snippet: %v\n%s", err, out)
	}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the README's snippet printed %q, its comments say %q", got, want)
	}
}
