package network

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
)

// TestRangeInUse: a second node with a range another node on the host
// uses is refused, told which node; once the first closes, it may start.
func TestRangeInUse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
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
	third, err := New(cfg(3), logx.Discard())
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	third.Close()
}
