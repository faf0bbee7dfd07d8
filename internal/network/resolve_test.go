package network

import (
	"net/netip"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestNameResolver: answers come from the servers given, are kept for
// their TTL within [minTTL, maxTTL] (a failure for minTTL), and a name
// resolves to an address only among its A records.
func TestNameResolver(t *testing.T) {
	dns := testutil.ServeDNS(t)
	dns.Set("short.test", 1, "203.0.113.5")
	dns.Set("long.test", 86400, "203.0.113.6", "203.0.113.7")
	r := newNameResolver([]netip.AddrPort{dns.Addr})
	ctx := t.Context()
	for _, tc := range []struct {
		name, addr string
		ok         bool
		kept       time.Duration // how long the answer is kept
	}{
		{"short.test", "203.0.113.5", true, minTTL},
		{"long.test", "203.0.113.7", true, maxTTL},
		{"long.test", "203.0.113.5", false, maxTTL},
		{"missing.test", "203.0.113.5", false, minTTL},
	} {
		before := time.Now()
		ok, _ := r.resolvesTo(ctx, tc.name, netip.MustParseAddr(tc.addr))
		if ok != tc.ok {
			t.Errorf("%s → %s: %v, want %v", tc.name, tc.addr, ok, tc.ok)
		}
		r.mu.Lock()
		until := r.cache[tc.name].until
		r.mu.Unlock()
		if kept := until.Sub(before); kept < tc.kept-time.Second || kept > tc.kept+time.Second { // (a second: a kept answer was fetched earlier)
			t.Errorf("%s is kept for %v, want %v", tc.name, kept, tc.kept)
		}
	}
	asked := dns.Queries()
	if ok, _ := r.resolvesTo(ctx, "long.test", netip.MustParseAddr("203.0.113.6")); !ok || dns.Queries() != asked {
		t.Errorf("a kept answer: %v, and %d queries more", ok, dns.Queries()-asked)
	}
}
