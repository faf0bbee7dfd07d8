package network

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestUpstreamNotTheHostsNorANodes: a sandbox's upstream proxy is never
// an address the host got after the node started (its networks were read
// then) nor a cluster's node's, whose services a tenant would reach from
// the node through it.
func TestUpstreamNotTheHostsNorANodes(t *testing.T) {
	testkit.NeedRoot(t, "")
	node := netip.MustParseAddr("203.0.113.77")
	m, err := New(Config{Range: netip.MustParsePrefix("198.18.232.0/24"), Table: fmt.Sprintf("cove-test-h%d", os.Getpid()), PoolSize: 1,
		Nodes: func() []netip.Addr { return []netip.Addr{node} }}, logx.Discard())
	must(t, err)
	defer m.Close()
	n, err := m.Acquire(context.Background(), true)
	must(t, err)
	defer m.Release(n)
	ctx := context.Background()
	must(t, m.SetEgressProxy(ctx, n, &EgressProxy{Address: "203.0.113.5:1080"})) // a public address: taken
	// An address the host gets now, on a veth of the test's.
	name := fmt.Sprintf("tups%d", os.Getpid()%100000)
	must(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}))
	defer func() {
		if l, err := netlink.LinkByName(name); err == nil {
			_ = netlink.LinkDel(l)
		}
	}()
	l, err := netlink.LinkByName(name)
	must(t, err)
	a, _ := netlink.ParseAddr("198.51.100.202/32")
	must(t, netlink.AddrAdd(l, a))
	must(t, netlink.LinkSetUp(l))
	for _, addr := range []string{"198.51.100.202:1080", node.String() + ":1080"} {
		if err := m.SetEgressProxy(ctx, n, &EgressProxy{Address: addr}); err == nil {
			t.Errorf("an upstream at %s was taken", addr)
		}
	}
}
