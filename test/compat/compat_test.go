// Package compat drives the official E2B SDKs (npm) against a real `cove
// server` started from bin/cove.
package compat

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const apiKey = "e2b_00000000000000000000000000000000c0ffee00"

// startServer runs bin/cove server on a free port and returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cove server needs root")
	}
	bin, err := filepath.Abs("../../bin/cove")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make build (make test does)", bin)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "server", "--listen", addr, "--data-dir", dataDir, "--api-key", apiKey)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	logf, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("server log:\n%s", b)
		}
		killLeftovers(t, dataDir)
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("server did not listen on %s", addr)
	return ""
}

// killLeftovers ends sandboxes the server left running (it leaves them on
// purpose at shutdown, for the next start to adopt) and checks each is gone.
func killLeftovers(t *testing.T, dataDir string) {
	entries, _ := os.ReadDir(filepath.Join(dataDir, "node"))
	if len(entries) > 0 {
		t.Errorf("sandboxes left after the suite: %d records", len(entries))
	}
	// A second start adopts and the test kills through the API: here, make
	// sure nothing of the suite keeps running.
	for _, e := range entries {
		id := strings.TrimSuffix(e.Name(), ".json")
		b, _ := os.ReadFile(filepath.Join(dataDir, "sandboxes", id, "state.json"))
		if i := strings.Index(string(b), `"pid":`); i >= 0 {
			f := strings.FieldsFunc(string(b[i+6:]), func(r rune) bool { return r < '0' || r > '9' })
			if len(f) > 0 {
				if pid, err := strconv.Atoi(f[0]); err == nil {
					_ = syscallKill(pid)
				}
			}
		}
	}
}

func npmInstall(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("node_modules/e2b/package.json"); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

// TestOfficialJSSDK runs sdk.test.mjs with node's test runner.
func TestOfficialJSSDK(t *testing.T) {
	addr := startServer(t)
	npmInstall(t)
	cmd := exec.Command("node", "--test", "--test-concurrency=1", "--test-timeout=120000", "sdk.test.mjs")
	cmd.Env = append(os.Environ(),
		"E2B_API_URL=http://"+addr,
		"E2B_SANDBOX_URL=http://"+addr,
		"E2B_API_KEY="+apiKey,
		"E2B_DOMAIN=localhost",
		"COMPAT_RUN="+fmt.Sprint(time.Now().UnixNano()),
	)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("node --test: %v\n%s", err, strings.Join(lines, "\n"))
		return
	}
	t.Logf("%s", strings.Join(lines, "\n"))
}
