package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/server"
)

// TestPrepareDrivers: a server whose runsc is not there yet serves at
// once; while --prepare-drivers runs, a gVisor create is a 503 naming its
// last step, and once it is done gVisor joins: its sandboxes run. A
// preparation that fails leaves the driver unavailable (400), saying so.
// The command's stderr is kept, readable by root alone.
func TestPrepareDrivers(t *testing.T) {
	runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
	if runsc == "" || agent == "" {
		t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
	}
	const gvisor = `{"timeout":60,"metadata":{"cove.isolation":"gvisor"}}`
	t.Run("done", func(t *testing.T) {
		dir := t.TempDir()
		target, goOn := filepath.Join(dir, "runsc"), filepath.Join(dir, "go-on")
		script := "echo missing: $COVE_PREPARE_MISSING >&2; echo 'gvisor: fetching runsc'; " +
			"while [ ! -e " + goOn + " ]; do sleep 0.1; done; cp " + runsc + " " + target + "; echo 'gvisor: done'"
		s := startWith(t, func(c *server.Config) { c.Runsc, c.SandboxBinary, c.PrepareDrivers = target, agent, script })
		waitFor(t, func() bool {
			code, _, raw := s.do(t, "POST", "/v2/sandboxes", keyA, gvisor)
			if code != 503 {
				t.Fatalf("a gVisor create while it is prepared: %d %s", code, raw)
			}
			return strings.Contains(string(raw), "being prepared") && strings.Contains(string(raw), "gvisor: fetching runsc") &&
				strings.Contains(string(raw), `"error_code":"isolation_being_prepared"`)
		})
		if err := os.WriteFile(goOn, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var id, tok string
		waitFor(t, func() bool {
			code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, gvisor)
			if code == 503 {
				return false
			}
			if code != 201 {
				t.Fatalf("a gVisor create once prepared: %d %s", code, raw)
			}
			id, tok = m["sandboxID"].(string), m["envdAccessToken"].(string)
			return true
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := run(ctx, s.url, id, tok, "echo in gvisor"); err != nil || strings.TrimSpace(out) != "in gvisor" {
			t.Errorf("a command in the gVisor sandbox: %q %v", out, err)
		}
		log := filepath.Join(s.dataDir, "prepare.log")
		st, err := os.Stat(log)
		raw, _ := os.ReadFile(log)
		if err != nil || st.Mode().Perm() != 0o600 || string(raw) != "missing: gvisor\n" {
			t.Errorf("prepare.log: %v %v %q", st, err, raw)
		}
	})
	t.Run("failed", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "runsc")
		s := startWith(t, func(c *server.Config) {
			c.Runsc, c.SandboxBinary, c.PrepareDrivers = target, agent, "echo 'gvisor: fetching runsc'; echo no archive >&2; exit 3"
		})
		waitFor(t, func() bool {
			code, _, raw := s.do(t, "POST", "/v2/sandboxes", keyA, gvisor)
			if code == 503 {
				return false
			}
			if code != 400 || !strings.Contains(string(raw), "preparing it failed: exit status 3") || !strings.Contains(string(raw), "prepare.log") {
				t.Fatalf("a gVisor create after the preparation failed: %d %s", code, raw)
			}
			return true
		})
	})
}
