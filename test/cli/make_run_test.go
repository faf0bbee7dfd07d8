package cli_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestMakeRunArgs checks the README's `make run ARGS=…` line: make passes
// the flags to cove server as written, and cove server knows each of them.
func TestMakeRunArgs(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- readme:make-run -->\n```sh\n")
	if !ok {
		t.Fatal("README.md has no make run block")
	}
	m := regexp.MustCompile(`^make run ARGS='([^']*)'`).FindStringSubmatch(rest)
	if m == nil {
		t.Fatalf("the block is not `make run ARGS='…'`: %q", rest)
	}
	out, err := exec.Command("make", "-n", "-C", "../..", "run", "ARGS="+m[1]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "./bin/cove server "+m[1]+"\n") {
		t.Fatalf("make -n run ARGS=%q: %v\n%s", m[1], err, out)
	}
	help, err := exec.Command(testutil.Binary(t), "server", "--help").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(m[1]) {
		if strings.HasPrefix(f, "--") && !strings.Contains(string(help), "      "+f+" ") {
			t.Errorf("cove server has no flag %s", f)
		}
	}
}
