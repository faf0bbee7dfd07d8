package compat

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// block is one fenced block of a document: its language, first line and
// text.
type block struct {
	lang, text string
	line       int
}

// blocks are the fenced blocks of the document at path.
func blocks(t *testing.T, path string) []block {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	for i, line := range strings.Split(string(doc), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```"), line: i + 1}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

var jsImport = regexp.MustCompile(`(?m)^import \{([^}]*)\} from '([^']+)'`)

// TestDocSnippetsCompile: every snippet of the README and the guides
// parses — JavaScript as an ES module (whose imports the official
// packages export), Python, and shell — beside the tests that run them
// (runReadmeSnippet, TestGuideUpstreamRecipe, runGuideExtend, test/cli's,
// sdk/go's for Go).
func TestDocSnippetsCompile(t *testing.T) {
	npmInstall(t)
	dir := t.TempDir()
	for _, doc := range []string{"../../README.md", "../../docs/GUIDE.md", "../../docs/DEPLOY.md", "../../docs/OPERATIONS.md"} {
		for _, b := range blocks(t, doc) {
			where := fmt.Sprintf("%s line %d", filepath.Base(doc), b.line)
			var cmd *exec.Cmd
			switch b.lang {
			case "js":
				file := filepath.Join(dir, "snippet.mjs")
				if err := os.WriteFile(file, []byte(b.text), 0o600); err != nil {
					t.Fatal(err)
				}
				cmd = exec.Command("node", "--check", file)
				for _, m := range jsImport.FindAllStringSubmatch(b.text, -1) {
					names := strings.Join(strings.Fields(strings.ReplaceAll(m[1], ",", " ")), "','")
					check := exec.Command("node", "--input-type=module", "-e",
						"const m = await import('"+m[2]+"'); for (const n of ['"+names+"']) if (!(n in m)) { console.log('no export ' + n); process.exit(1) }")
					if out, err := check.CombinedOutput(); err != nil {
						t.Errorf("%s: %s from %s: %v %s", where, m[1], m[2], err, out)
					}
				}
			case "python":
				file := filepath.Join(dir, "snippet.py")
				if err := os.WriteFile(file, []byte(b.text), 0o600); err != nil {
					t.Fatal(err)
				}
				cmd = exec.Command(venvPython, "-m", "py_compile", file)
			case "sh":
				cmd = exec.Command("bash", "-n", "-c", b.text)
			default:
				continue
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s (%s) does not parse: %v\n%s", where, b.lang, err, out)
			}
		}
	}
}
