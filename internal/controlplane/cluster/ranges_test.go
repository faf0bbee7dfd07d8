package cluster

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// TestSandboxRanges: the live nodes' reported sandbox ranges, those
// without networks (or a range unread) left out.
func TestSandboxRanges(t *testing.T) {
	c := &Cluster{nodes: map[string]*member{}}
	for id, r := range map[string]string{"n1": "198.18.0.0/15", "n2": "10.77.0.0/16", "n3": "", "n4": "nonsense"} {
		c.nodes[id] = &member{}
		c.nodes[id].report(store.Member{ID: id, SandboxRange: r}, time.Now())
	}
	got := c.SandboxRanges()
	slices.SortFunc(got, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	if want := []netip.Prefix{netip.MustParsePrefix("10.77.0.0/16"), netip.MustParsePrefix("198.18.0.0/15")}; !slices.Equal(got, want) {
		t.Errorf("SandboxRanges = %v, want %v", got, want)
	}
}
