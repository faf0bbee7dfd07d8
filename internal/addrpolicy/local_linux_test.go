package addrpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestHostAddressAddedLater: an address the host gets after the policy
// read its interfaces is its own at once (the kernel's local route), not
// only at the next read.
func TestHostAddressAddedLater(t *testing.T) {
	testkit.NeedRoot(t, "adds an address to a veth of the test's")
	p := New(Config{Flag: "--x-allow"})
	a := netip.MustParseAddr("198.51.100.201") // TEST-NET-2, on no machine's network
	if err := p.Check(a); err != nil {
		t.Fatalf("before the host has it: %v", err)
	}
	name := fmt.Sprintf("tpol%d", os.Getpid()%100000)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr(a.String() + "/32")
	if err := netlink.AddrAdd(l, addr); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	var r *Refused
	if err := p.Check(a); !errors.As(err, &r) || r.Why != "this host's own" {
		t.Errorf("once the host has it: %v, want refused as the host's own", err)
	}
}

// BenchmarkCheck is the cost a dial pays: a public address, which asks
// the kernel's routes (isLocal); a private one, refused before that.
func BenchmarkCheck(b *testing.B) {
	p := New(Config{})
	for _, addr := range []string{"203.0.113.7", "10.1.2.3"} {
		a := netip.MustParseAddr(addr)
		b.Run(addr, func(b *testing.B) {
			for b.Loop() {
				_ = p.Check(a)
			}
		})
	}
}
