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

// TestReadmeCLI runs the README's CLI block as written, in an empty
// directory, with bin/cove on PATH and the variables a first start
// prints: every command must end well. (TestTeamsReadme runs its teams
// block.)
func TestReadmeCLI(t *testing.T) {
	srv := testutil.StartServer(t, key)
	env := append(os.Environ(), "PATH="+filepath.Dir(testutil.Binary(t))+":"+os.Getenv("PATH"),
		"COVE_API_URL="+srv.URL, "COVE_API_KEY="+key, "COVE_DATA_DIR="+srv.DataDir)
	lang, script := testutil.DocBlock(t, "../../README.md", "readme:cli")
	if lang != "sh" {
		t.Fatalf("the README's CLI block is in %q, not sh", lang)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-e", "-x", "-c", script)
	cmd.Dir, cmd.Env = t.TempDir(), env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's CLI block: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "Error") {
		t.Errorf("the README's CLI block said Error:\n%s", out)
	}
}
