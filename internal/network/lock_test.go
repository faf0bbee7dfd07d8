package network

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestRangeInUse: a second node with a range another node on the host
// uses is refused, told which node; once the first closes, it may start.
func TestRangeInUse(t *testing.T) {
	testkit.NeedRoot(t, "")
	r := netip.MustParsePrefix("198.19.246.0/24")
	cfg := func(n int) Config {
		return Config{Range: r, PoolSize: 1, Table: fmt.Sprintf("cove-test-l%d-%d", os.Getpid(), n), Owner: fmt.Sprintf("data dir /first-%d", n)}
	}
	first, err := New(cfg(1), logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(cfg(2), logx.Discard())
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second node on the same range started")
	}
	if !strings.Contains(err.Error(), "in use by another cove server") || !strings.Contains(err.Error(), fmt.Sprintf("pid %d, data dir /first-1", os.Getpid())) {
		t.Errorf("the second node's error: %v", err)
	}
	first.Close()
	// A lock file no process holds (its node was killed) goes at the next
	// node's start; a closed node's goes with it.
	stale := filepath.Join(lockDir, fmt.Sprintf("zz%d.lock", os.Getpid()))
	if err := os.WriteFile(stale, []byte("range 10.0.0.0/24, pid 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	third, err := New(cfg(3), logx.Discard())
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unheld lock file is kept: %v", err)
	}
	third.Close()
	if _, err := os.Stat(filepath.Join(lockDir, nodePrefix(r)+".lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a closed node's lock file is kept: %v", err)
	}
}
