package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
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

// TestPrepareDriversLogged: what a server preparing its drivers says in
// its log (README, OPERATIONS): a line per step of the command, and the
// driver's joining.
func TestPrepareDriversLogged(t *testing.T) {
	testutil.NeedRunsc(t)
	runsc, err := filepath.Abs("../../bin/runsc")
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "runsc")
	p := testutil.StartProc(t, key, "--runsc", target, "--prepare-drivers", "echo 'gvisor: copying runsc'; cp "+runsc+" "+target)
	testkit.Eventually(t, time.Minute, func() error {
		if !strings.Contains(p.Log(), "gvisor isolation ready") {
			return errors.New("gvisor did not join")
		}
		return nil
	})
	if log := p.Log(); !strings.Contains(log, `msg="preparing drivers" step="gvisor: copying runsc"`) {
		t.Errorf("the step is not in the server's log:\n%s", log)
	}
}
