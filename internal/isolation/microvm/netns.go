package microvm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A guest in a namespace of the node's network pool carries the
// sandbox's address itself: routeGuest moves the address off the
// namespace's eth0 (the pool's veth) and routes it to the tap, with proxy
// ARP on both sides, so the host's end and the guest each see the other
// as a neighbour and nothing outside the namespace changes (the node's
// firewall, NAT and egress proxy key on the sandbox's address). Root in
// the guest may set any address or MAC on its side: the namespace
// forwards only what comes from the sandbox's address, and from outside
// only replies. The node's dials come from the namespace over the tap's
// link-local pair. unrouteGuest puts the namespace back as the pool made
// it, because the pool gives it to the next sandbox.

// guestTable is the namespace's nftables table for its guest.
const guestTable = "cove-guest"

// poolLink is the namespace's link to the host (network.build names it).
const poolLink = "eth0"

// PoolAddress is the sandbox's address in a pool namespace: eth0's
// (with its prefix) and the default route's gateway.
type PoolAddress struct {
	Addr    netip.Prefix `json:"addr"`
	Gateway netip.Addr   `json:"gateway"`
}

// readPoolAddress reads it, on the calling thread (in the namespace).
func readPoolAddress() (PoolAddress, error) {
	eth, err := netlink.LinkByName(poolLink)
	if err != nil {
		return PoolAddress{}, fmt.Errorf("the pool's %s: %w", poolLink, err)
	}
	addrs, err := netlink.AddrList(eth, netlink.FAMILY_V4)
	if err != nil || len(addrs) != 1 {
		return PoolAddress{}, fmt.Errorf("the pool's %s has %d addresses (%v), want one", poolLink, len(addrs), err)
	}
	routes, err := netlink.RouteList(eth, netlink.FAMILY_V4)
	if err != nil {
		return PoolAddress{}, err
	}
	var pa PoolAddress
	ones, _ := addrs[0].Mask.Size()
	a, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	pa.Addr = netip.PrefixFrom(a, ones)
	for _, r := range routes {
		if r.Gw != nil && (r.Dst == nil || r.Dst.IP.IsUnspecified()) {
			pa.Gateway, _ = netip.AddrFromSlice(r.Gw.To4())
		}
	}
	if !pa.Gateway.IsValid() {
		return PoolAddress{}, fmt.Errorf("the pool's %s has no default route", poolLink)
	}
	return pa, nil
}

// routeGuest gives the guest the sandbox's address, on the calling thread
// (in the namespace).
func routeGuest(pa PoolAddress) error {
	if err := makeTap(); err != nil {
		return err
	}
	eth, err := netlink.LinkByName(poolLink)
	if err != nil {
		return err
	}
	tap, err := netlink.LinkByName(tapName)
	if err != nil {
		return err
	}
	// The address goes (its routes with it); the host's end stays a
	// neighbour on eth0, the sandbox's address one on the tap.
	if err := netlink.AddrDel(eth, &netlink.Addr{IPNet: prefixNet(pa.Addr)}); err != nil {
		return fmt.Errorf("move the sandbox's address: %w", err)
	}
	for _, r := range []*netlink.Route{
		{LinkIndex: eth.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(pa.Gateway, 32)), Scope: netlink.SCOPE_LINK},
		{LinkIndex: eth.Attrs().Index, Gw: pa.Gateway.AsSlice()},
		{LinkIndex: tap.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(pa.Addr.Addr(), 32)), Scope: netlink.SCOPE_LINK},
	} {
		if err := netlink.RouteAdd(r); err != nil {
			return fmt.Errorf("route %v: %w", r, err)
		}
	}
	for _, kv := range [][2]string{
		{"net/ipv4/conf/" + poolLink + "/proxy_arp", "1"},
		{"net/ipv4/conf/" + tapName + "/proxy_arp", "1"},
	} {
		if err := writeSysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: guestTable}
	c.AddTable(t)
	drop := nftables.ChainPolicyDrop
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all})
	}
	// Out: from the sandbox's address only; in: replies only.
	rule(fwd, ifIs(expr.MetaKeyIIFNAME, tapName), ifIs(expr.MetaKeyOIFNAME, poolLink),
		sourceIs(pa.Addr.Addr().AsSlice()), []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})
	rule(fwd, ifIs(expr.MetaKeyIIFNAME, poolLink), ifIs(expr.MetaKeyOIFNAME, tapName),
		[]expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("the guest's routing rules: %w", err)
	}
	return writeSysctl("net/ipv4/ip_forward", "1")
}

// unrouteGuest puts the namespace back as the pool made it, on the
// calling thread (in the namespace): the tap (and its route) gone, the
// rules, forwarding and proxy ARP off, the sandbox's address and default
// route on eth0 again, the flows the namespace tracked for the guest
// forgotten.
func unrouteGuest(pa PoolAddress) error {
	var errsSeen []error
	for _, name := range []string{"net/ipv4/ip_forward", "net/ipv4/conf/" + poolLink + "/proxy_arp"} {
		if err := writeSysctl(name, "0"); err != nil {
			errsSeen = append(errsSeen, err)
		}
	}
	if c, err := nftables.New(); err != nil {
		errsSeen = append(errsSeen, err)
	} else {
		c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: guestTable})
		if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			errsSeen = append(errsSeen, fmt.Errorf("remove the guest's rules: %w", err))
		}
	}
	if l, err := netlink.LinkByName(tapName); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errsSeen = append(errsSeen, fmt.Errorf("remove the tap: %w", err))
		}
	}
	if eth, err := netlink.LinkByName(poolLink); err != nil {
		errsSeen = append(errsSeen, err)
	} else {
		// The routes routeGuest added go; the address brings its own.
		for _, r := range []*netlink.Route{
			{LinkIndex: eth.Attrs().Index, Gw: pa.Gateway.AsSlice()},
			{LinkIndex: eth.Attrs().Index, Dst: prefixNet(netip.PrefixFrom(pa.Gateway, 32)), Scope: netlink.SCOPE_LINK},
		} {
			if err := netlink.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
				errsSeen = append(errsSeen, fmt.Errorf("remove route %v: %w", r, err))
			}
		}
		if err := netlink.AddrAdd(eth, &netlink.Addr{IPNet: prefixNet(pa.Addr)}); err != nil && !errors.Is(err, unix.EEXIST) {
			errsSeen = append(errsSeen, fmt.Errorf("give eth0 its address back: %w", err))
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: pa.Gateway.AsSlice()}); err != nil && !errors.Is(err, unix.EEXIST) {
			errsSeen = append(errsSeen, fmt.Errorf("give eth0 its default route back: %w", err))
		}
	}
	if err := netlink.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
		errsSeen = append(errsSeen, fmt.Errorf("forget the guest's flows: %w", err))
	}
	return errors.Join(errsSeen...)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// ifIs matches an interface's whole name.
func ifIs(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b}}
}

// sourceIs matches a source address (the table is IPv4's alone).
func sourceIs(ip net.IP) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip},
	}
}

// writeSysctl sets a setting of the calling thread's network namespace.
func writeSysctl(name, value string) error {
	if err := os.WriteFile("/proc/sys/"+name, []byte(value), 0); err != nil {
		return fmt.Errorf("set %s: %w", name, err)
	}
	return nil
}
