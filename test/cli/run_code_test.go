package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/testutil"
)

// codeInterpreterDockerfile is a template over base that starts the code
// interpreter as code-interpreter-v1 does.
const codeInterpreterDockerfile = `FROM base
CMD sudo /.cove/cove-envd code-interpreter
`

// childDockerfile is a template over ci-cli: variables, a file, a
// directory; no CMD, so ci-cli's start command runs.
const childDockerfile = `FROM ci-cli
ENV CHILD=from-the-dockerfile
USER root
RUN mkdir -p /srv/child && echo made-by-run > /srv/child/data.txt
USER user
WORKDIR /srv/child
`

func TestRunCode(t *testing.T) {
	srv := testutil.StartServer(t, key)
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(codeInterpreterDockerfile), 0o644)
	if out, errOut, code := c.run(t, "", "template", "build", "--name", "ci-cli", "--ready-cmd", "/.cove/cove-envd code-interpreter --ready", dir); code != 0 {
		t.Fatalf("build: %s %s", out, errOut)
	}
	out, errOut, code := c.run(t, "", "sandbox", "create", "-t", "ci-cli")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	defer c.run(t, "", "sandbox", "kill", id)

	if out, errOut, code := c.run(t, "x = 6\nprint('six')\nx * 7\n", "sandbox", "run-code", id); code != 0 || out != "six\n42\n" {
		t.Errorf("python from stdin: %q %q %d", out, errOut, code)
	}
	script := filepath.Join(dir, "plot.py")
	os.WriteFile(script, []byte("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"), 0o644)
	images := t.TempDir()
	if _, errOut, code := c.run(t, "", "sandbox", "run-code", "--out", images, id, script); code != 0 || !strings.Contains(errOut, "result-1.png") {
		t.Errorf("a figure: %q %d", errOut, code)
	}
	if b, err := os.ReadFile(filepath.Join(images, "result-1.png")); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("the saved figure: %v", err)
	}
	if out, _, code := c.run(t, "echo $((2 + 3))", "sandbox", "run-code", "-l", "bash", id, "-"); code != 0 || out != "5\n" {
		t.Errorf("bash: %q %d", out, code)
	}
	// The language by the file's extension, -l over it.
	for _, f := range []struct{ name, code, args, want string }{
		{"sum.sh", "echo $((2 + 3))", "", "5\n"},
		{"sum.js", "[1, 2].map((x) => x * 2).join(' ')", "", "2 4\n"},
		{"sum.ts", "const n: number = 3; n * 3", "", "9\n"},
		{"sum.R", "sum(c(1, 2, 3))", "", "[1] 6\n"},
		{"sum.java", "int n = 7;\nn * 6", "", "42\n"},
		{"sum.txt", "print(1 + 1)", "", "2\n"},
		{"shell.py", "echo over", "bash", "over\n"},
	} {
		file := filepath.Join(dir, f.name)
		os.WriteFile(file, []byte(f.code), 0o644)
		args := []string{"sandbox", "run-code", id, file}
		if f.args != "" {
			args = []string{"sandbox", "run-code", "-l", f.args, id, file}
		}
		if out, errOut, code := c.run(t, "", args...); code != 0 || out != f.want {
			t.Errorf("%s: %q %q %d, want %q", f.name, out, errOut, code, f.want)
		}
	}
	if _, errOut, code := c.run(t, "1/0", "sandbox", "run-code", id); code != 1 || !strings.Contains(errOut, "ZeroDivisionError") {
		t.Errorf("an exception: %q %d", errOut, code)
	}

	// A template FROM it is a code interpreter still, its variables,
	// files and directory the kernels'; one with its own CMD runs that
	// instead, and its build says what it replaced.
	child := t.TempDir()
	os.WriteFile(filepath.Join(child, "Dockerfile"), []byte(childDockerfile), 0o644)
	if out, errOut, code := c.run(t, "", "template", "build", "--name", "ci-cli-child", child); code != 0 || !strings.Contains(out, "start command inherited from template ci-cli") {
		t.Fatalf("build a child: %s %s", out, errOut)
	}
	out, errOut, code = c.run(t, "", "sandbox", "create", "-t", "ci-cli-child")
	if code != 0 {
		t.Fatalf("create the child: %s", errOut)
	}
	kid := strings.TrimSpace(out)
	defer c.run(t, "", "sandbox", "kill", kid)
	if out, errOut, code := c.run(t, "import os\nprint(os.environ['CHILD'], os.getcwd(), open('data.txt').read().strip())\n", "sandbox", "run-code", kid); code != 0 || out != "from-the-dockerfile /srv/child made-by-run\n" {
		t.Errorf("run-code in the child: %q %q %d", out, errOut, code)
	}
	// GUIDE.md's way to keep both: both in one start command.
	both := "sudo /.cove/cove-envd code-interpreter & exec python3 -m http.server 8000"
	os.WriteFile(filepath.Join(child, "Dockerfile"), []byte("FROM ci-cli\nCMD "+both+"\n"), 0o644)
	if out, errOut, code := c.run(t, "", "template", "build", "--name", "ci-cli-own", "--ready-cmd", "/.cove/cove-envd code-interpreter --ready && curl -sf localhost:8000 >/dev/null", child); code != 0 ||
		!strings.Contains(out, `the start command "`+both+`" replaces template ci-cli's, "sudo /.cove/cove-envd code-interpreter"`) {
		t.Fatalf("build a child with its own CMD: %s %s", out, errOut)
	}
	out, errOut, code = c.run(t, "", "sandbox", "create", "-t", "ci-cli-own")
	if code != 0 {
		t.Fatalf("create the child with its own CMD: %s", errOut)
	}
	own := strings.TrimSpace(out)
	defer c.run(t, "", "sandbox", "kill", own)
	if out, errOut, code := c.run(t, "import urllib.request\nurllib.request.urlopen('http://localhost:8000').status\n", "sandbox", "run-code", own); code != 0 || out != "200\n" {
		t.Errorf("both start commands' servers: %q %q %d", out, errOut, code)
	}

	// A sandbox without a code interpreter: the error says what run-code
	// needs and how to get it.
	out, errOut, code = c.run(t, "", "sandbox", "create", "-t", "base")
	if code != 0 {
		t.Fatalf("create base: %s", errOut)
	}
	plain := strings.TrimSpace(out)
	defer c.run(t, "", "sandbox", "kill", plain)
	_, errOut, code = c.run(t, "1+1", "sandbox", "run-code", plain)
	if code == 0 || !strings.Contains(errOut, "has no code interpreter: its template, base,") || !strings.Contains(errOut, "cove sandbox create --template code-interpreter-v1") {
		t.Errorf("run-code in a base sandbox: %q %d", errOut, code)
	}
}
