package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestFirstStartKeyLast: a first start's key and the lines to export come
// after the start's log lines, once the server listens — the last lines a
// user sees of the start, not lines scrolled away above them.
func TestFirstStartKeyLast(t *testing.T) {
	addr := testutil.FreeAddr(t)
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(testutil.Binary(t), "server", "--listen", addr, "--data-dir", data, "--network=false", "--pool-size", "0",
		"--base=host", "--prepare-templates=false", "--cgroup-parent", "cove-test-first-"+filepath.Base(filepath.Dir(data)))
	// One pipe for both, as a terminal is: their order is kept.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				r.Close()
				return
			}
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	text := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	if !testkit.Wait(30*time.Second, func() bool { return strings.Contains(text(), "export COVE_API_URL=") }) {
		t.Fatalf("no key printed:\n%s", text())
	}
	time.Sleep(200 * time.Millisecond) // what else the start writes
	got := text()
	listening := strings.Index(got, "cove server listening")
	key := strings.Index(got, "Created an API key")
	if listening < 0 || key < listening {
		t.Errorf("the key is not printed after the start's log lines:\n%s", got)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "cove key create makes another") {
		t.Errorf("the start's last line is %q, not the key's block:\n%s", last, got)
	}
}
