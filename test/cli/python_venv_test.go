package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonVenvWithoutPyPI: as the README says, `make test` fails, saying
// so, when PyPI cannot be reached: scripts/python-venv.sh, against an
// index that refuses every connection (a closed loopback port), exits
// non-zero naming what it could not install, and leaves no half-made
// environment behind.
func TestPythonVenvWithoutPyPI(t *testing.T) {
	venv := filepath.Join(t.TempDir(), "venv")
	cmd := exec.Command("../../scripts/python-venv.sh")
	cmd.Env = append(os.Environ(), "COVE_PY_VENV="+venv, "PIP_INDEX_URL=http://127.0.0.1:9/simple",
		"PIP_FIND_LINKS=", "PIP_RETRIES=0", "PIP_TIMEOUT=5", "PIP_CONFIG_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("python-venv.sh succeeded without PyPI:\n%s", out)
	}
	if !strings.Contains(string(out), "python-venv: could not install the Python SDKs") {
		t.Errorf("python-venv.sh without PyPI said:\n%s", out)
	}
	if _, err := os.Stat(venv); !os.IsNotExist(err) {
		t.Errorf("a half-made environment is left at %s: %v", venv, err)
	}
}
