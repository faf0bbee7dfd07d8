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
	_, rest := testutil.DocBlock(t, "../../README.md", "readme:make-run")
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

// TestPrepareDriversScript runs what make run prepares drivers with, on a
// machine that has what they need (make test built runsc): it names each
// step and ends well, and a driver it does not know is no failure.
func TestPrepareDriversScript(t *testing.T) {
	testutil.NeedRunsc(t)
	cmd := exec.Command("../../scripts/prepare-drivers.sh")
	cmd.Env = append(os.Environ(), "COVE_PREPARE_MISSING=gvisor microvm firecracker")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("prepare-drivers.sh: %v\n%s", err, out)
	}
	steps := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(steps) < 3 || !strings.HasPrefix(steps[0], "gvisor: ") || steps[len(steps)-1] != "microvm: QEMU and the guests' kernel are here" {
		t.Errorf("prepare-drivers.sh's steps: %q", steps)
	}
}
