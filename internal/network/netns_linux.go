package network

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/covesandbox/cove/internal/isolation/hostproc"
)

// make builds a network: a new namespace with lo and eth0 up, eth0
// addressed and routed through the host end of a veth pair.
func (m *Manager) make() (*Net, error) {
	slot, err := m.reserve()
	if err != nil {
		return nil, err
	}
	gw, addr := m.slotAddrs(slot)
	n := &Net{Slot: slot, Addr: addr, Gateway: gw, Veth: m.vethName(slot)}
	if err := build(n); err != nil {
		if n.NS != nil {
			n.NS.Close()
		}
		if l, lerr := netlink.LinkByName(n.Veth); lerr == nil {
			_ = netlink.LinkDel(l)
		}
		m.unreserve(slot)
		return nil, fmt.Errorf("build network %s: %w", addr, err)
	}
	return n, nil
}

// linkMTU is the MTU of both ends of a sandbox's veth pair.
const linkMTU = 65535

func build(n *Net) error {
	ns, err := hostproc.NewNetNS()
	if err != nil {
		return err
	}
	n.NS = os.NewFile(uintptr(ns), "netns")
	peer := n.Veth + "p"
	// A 64 KiB MTU, as loopback has: the link between a sandbox and its host
	// is never the narrow one (TCP takes the path's MSS from its peer), and
	// the hop to the egress proxy and through NAT moves a third more per
	// second than at 1500 (make bench).
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n.Veth, MTU: linkMTU}, PeerName: peer, PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth: %w", err)
	}
	host, err := netlink.LinkByName(n.Veth)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipnet(n.Gateway, 30)}); err != nil {
		return fmt.Errorf("address host end: %w", err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(netns.NsHandle(ns))
	if err != nil {
		return err
	}
	defer h.Close()
	inner, err := h.LinkByName(peer)
	if err != nil {
		return err
	}
	if err := h.LinkSetName(inner, "eth0"); err != nil {
		return err
	}
	if err := h.AddrAdd(inner, &netlink.Addr{IPNet: ipnet(n.Addr, 30)}); err != nil {
		return fmt.Errorf("address sandbox end: %w", err)
	}
	if err := h.LinkSetUp(inner); err != nil {
		return err
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.LinkSetUp(lo); err != nil {
		return err
	}
	return h.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Gw: net.IP(n.Gateway.AsSlice())})
}

func ipnet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}
