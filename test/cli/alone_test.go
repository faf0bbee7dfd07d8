package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestCoveAlone runs the cove binary by itself (no cove-sandbox beside it,
// runsc named by flag) as the README says it works: a sandbox on every
// driver this host has starts from cove itself and runs a command.
func TestCoveAlone(t *testing.T) {
	testkit.NeedRoot(t, "cove server needs root")
	testutil.NeedRunsc(t)
	dir := t.TempDir()
	alone := filepath.Join(dir, "cove")
	data, err := os.ReadFile(testutil.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	runsc, _ := filepath.Abs(filepath.Join(filepath.Dir(testutil.Binary(t)), "runsc"))
	srv := testutil.StartServerBinary(t, alone, key, "--runsc", runsc, "--pool-size", "0")
	c := cli{bin: alone, env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}
	drivers := []string{"namespaces", "gvisor"}
	if _, err := os.Stat("/var/cache/cove-microvm/kernel"); err == nil {
		drivers = append(drivers, "microvm") // make deps unpacks its kernel
	}
	for _, d := range drivers {
		t.Run(d, func(t *testing.T) {
			out, errOut, code := c.run(t, "", "sandbox", "create", "-m", "cove.isolation="+d)
			if code != 0 {
				t.Fatalf("create: %s", errOut)
			}
			id := strings.TrimSpace(out)
			defer c.run(t, "", "sandbox", "kill", id)
			if out, errOut, code := c.run(t, "", "sandbox", "exec", id, "--", "echo", "alone"); code != 0 || out != "alone\n" {
				t.Errorf("exec: %q %s %d", out, errOut, code)
			}
		})
	}
}
