package network

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strings"

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
	if err := limitNetNS(n.NS); err != nil {
		return err
	}
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
	// No IPv6 on the host's end either: no link-local address a sandbox
	// could reach the host's services through.
	if err := sysctl("net/ipv6/conf/"+n.Veth+"/disable_ipv6", "1"); err != nil {
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

// Socket buffers of one TCP connection in a sandbox at most (the kernel's
// defaults are 6 MiB to receive and 4 MiB to send): every byte is charged
// to the sandbox's memory, and a smaller cap makes the limit bite later.
const (
	tcpRmem = "4096 131072 2097152"
	tcpWmem = "4096 16384 2097152"
)

// limitNetNS sets what a sandbox's namespace starts with, before its
// interface is made: IPv6 off for new interfaces (its loopback keeps ::1)
// and TCP buffers capped per socket.
func limitNetNS(ns *os.File) error {
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer host.Close()
	return hostproc.InNetNS(ns, host, func() error {
		for _, kv := range [][2]string{
			{"net/ipv6/conf/default/disable_ipv6", "1"},
			{"net/ipv4/tcp_rmem", tcpRmem},
			{"net/ipv4/tcp_wmem", tcpWmem},
		} {
			if err := sysctl(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// sysctl sets a kernel setting of the calling thread's network namespace.
// A kernel without IPv6 has no net/ipv6 and needs no setting there.
func sysctl(name, value string) error {
	err := os.WriteFile("/proc/sys/"+name, []byte(value), 0)
	if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(name, "net/ipv6/") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}

func ipnet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}
