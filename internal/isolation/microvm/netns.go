package microvm

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A guest in a namespace of the node's network pool is routed, not
// bridged: the namespace keeps its eth0 (the sandbox's address, the route
// through the host's end) as the pool made it, forwards what comes from
// the tap out of eth0 and masquerades it as the sandbox's address. Root in
// the guest may set any address or MAC on its side: only what leaves as
// the sandbox's address reaches the host, whose firewall then treats it as
// any sandbox of that address. Nothing outside reaches the guest but
// replies (the node's dials come from the namespace itself). unrouteGuest
// undoes it all, because the pool gives the namespace to the next sandbox.

// guestTable is the namespace's nftables table for its guest.
const guestTable = "cove-guest"

// poolLink is the namespace's link to the host (network.build names it).
const poolLink = "eth0"

// routeGuest makes the tap and routes it out of the pool's link, on the
// calling thread (in the namespace).
func routeGuest() error {
	if err := makeTap(); err != nil {
		return err
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: guestTable}
	c.AddTable(t)
	drop, accept := nftables.ChainPolicyDrop, nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	rule := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: all})
	}
	// Out: from the guest's own address only; in: replies only.
	rule(fwd, ifIs(expr.MetaKeyIIFNAME, tapName), ifIs(expr.MetaKeyOIFNAME, poolLink),
		sourceIs(net.ParseIP(guestAddr).To4()), []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})
	rule(fwd, ifIs(expr.MetaKeyIIFNAME, poolLink), ifIs(expr.MetaKeyOIFNAME, tapName),
		[]expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		})
	rule(post, ifIs(expr.MetaKeyOIFNAME, poolLink), []expr.Any{&expr.Masq{}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("the guest's routing rules: %w", err)
	}
	return writeSysctl("net/ipv4/ip_forward", "1")
}

// unrouteGuest removes what routeGuest made, on the calling thread (in
// the namespace): the tap, the rules, forwarding, and the flows the
// namespace tracked for the guest.
func unrouteGuest() error {
	var errsSeen []error
	if err := writeSysctl("net/ipv4/ip_forward", "0"); err != nil {
		errsSeen = append(errsSeen, err)
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
	if err := netlink.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
		errsSeen = append(errsSeen, fmt.Errorf("forget the guest's flows: %w", err))
	}
	return errors.Join(errsSeen...)
}

// ifIs matches an interface's whole name.
func ifIs(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b}}
}

// sourceIs matches an IPv4 source address.
func sourceIs(ip net.IP) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
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
