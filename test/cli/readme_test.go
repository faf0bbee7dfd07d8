package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestReadmeCLI runs the README's CLI and teams blocks as written, in an
// empty directory, with bin/cove on PATH and the variables a first start
// prints: every command must end well.
func TestReadmeCLI(t *testing.T) {
	srv := testutil.StartServer(t, key)
	env := append(os.Environ(), "PATH="+filepath.Dir(testutil.Binary(t))+":"+os.Getenv("PATH"),
		"COVE_API_URL="+srv.URL, "COVE_API_KEY="+key, "COVE_DATA_DIR="+srv.DataDir)
	for _, block := range []string{"readme:cli", "readme:teams"} {
		lang, script := testutil.DocBlock(t, "../../README.md", block)
		if lang != "sh" {
			t.Fatalf("the README's %s block is in %q, not sh", block, lang)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-e", "-x", "-c", script)
		cmd.Dir, cmd.Env = t.TempDir(), env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("the README's %s block: %v\n%s", block, err, out)
		}
		if strings.Contains(string(out), "Error") {
			t.Errorf("the README's %s block said Error:\n%s", block, out)
		}
	}
}
