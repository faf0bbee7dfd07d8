// Package addrpolicy is the one address policy of every connection the
// server makes on a tenant's behalf: image pulls (the registries, their
// token realms and redirects), webhooks, sandboxes' upstream proxies. A
// tenant names the far end (an image reference, a URL, a proxy's
// address), so the far end may be anything the host reaches: its
// loopback, a cloud's metadata service, the private network, the host's
// and the other nodes' own services. Those are refused unless the
// operator allows a range, and the check is made on the address actually
// connected to (Control), so that neither a name's DNS answer nor a
// redirect gets around it.
package addrpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/covesandbox/cove/internal/errs"
)

// Config is a policy's settings.
type Config struct {
	// Allow are the operator's ranges: connected to although loopback,
	// link-local, private, CGNAT, reserved, the host's or a node's.
	Allow []netip.Prefix
	// Flag names the operator's setting that allows a range, for the
	// refusal's message ("--registry-allow").
	Flag string
	// Never, when set, are ranges refused whatever Allow says: sandboxes'
	// (their traffic goes through their firewall, never from the host).
	Never func() []netip.Prefix
	// Nodes, when set, are the addresses of the cluster's nodes (Nodes.Addrs).
	Nodes func() []netip.Addr
}

// Policy decides which addresses the server connects to for a tenant.
type Policy struct {
	cfg  Config
	host *hostAddrs
}

// New returns the policy of cfg.
func New(cfg Config) *Policy {
	return &Policy{cfg: cfg, host: newHostAddrs()}
}

// Refused is an address the policy refuses, and why.
type Refused struct {
	Addr netip.Addr
	// Why names the address's class ("loopback", "this host's own").
	Why string
	// Flag is the operator's setting that could allow it ("" none can).
	Flag string
}

func (r *Refused) Error() string {
	if r.Flag == "" {
		return fmt.Sprintf("address %s is %s: never connected to for a tenant", r.Addr, r.Why)
	}
	return fmt.Sprintf("address %s is %s: not connected to for a tenant unless the operator allows its range (%s)", r.Addr, r.Why, r.Flag)
}

// Special ranges netip does not name.
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	reserved4   = netip.MustParsePrefix("240.0.0.0/4") // and the broadcast address
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	ietf        = netip.MustParsePrefix("192.0.0.0/24")
	siteLocal   = netip.MustParsePrefix("fec0::/10")
	v4Compat    = netip.MustParsePrefix("::/96")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// Check returns nil if a connection to a may be made for a tenant, else
// a PermissionDenied error holding a *Refused.
func (p *Policy) Check(a netip.Addr) error {
	if r := p.refused(a); r != nil {
		return errs.New(errs.PermissionDenied, "%w", r)
	}
	return nil
}

func (p *Policy) refused(a netip.Addr) *Refused {
	a = a.Unmap()
	never := func(why string) *Refused { return &Refused{Addr: a, Why: why} }
	switch {
	case !a.IsValid():
		return never("not an address")
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return never("unspecified")
	case a.IsMulticast() || reserved4.Contains(a):
		return never("multicast, broadcast or reserved")
	case v4Compat.Contains(a) && !a.IsLoopback():
		return never("an IPv4-compatible IPv6 address")
	}
	// An IPv6 address that leads to an IPv4 one (NAT64, 6to4) is judged by
	// that one too.
	if inner, ok := embedded(a); ok {
		if r := p.refused(inner); r != nil {
			r.Addr, r.Why = a, r.Why+" (embedded "+inner.String()+")"
			return r
		}
	}
	if p.cfg.Never != nil {
		for _, r := range p.cfg.Never() {
			if r.Contains(a) {
				return never("in the sandbox range " + r.String())
			}
		}
	}
	for _, r := range p.cfg.Allow {
		if r.Contains(a) {
			return nil
		}
	}
	why := ""
	switch {
	case a.IsLoopback():
		why = "loopback"
	case a.IsLinkLocalUnicast():
		why = "link-local"
	case a.IsPrivate() || siteLocal.Contains(a):
		why = "private"
	case cgnat.Contains(a):
		why = "shared address space (CGNAT)"
	case ietf.Contains(a):
		why = "reserved"
	case p.host.has(a):
		why = "this host's own"
	case p.isNode(a):
		why = "a node's own"
	default:
		return nil
	}
	return &Refused{Addr: a, Why: why, Flag: p.cfg.Flag}
}

// embedded is the IPv4 address a NAT64 (64:ff9b::/96) or 6to4 (2002::/16)
// address leads to.
func embedded(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

func (p *Policy) isNode(a netip.Addr) bool {
	if p.cfg.Nodes == nil {
		return false
	}
	for _, n := range p.cfg.Nodes() {
		if n.Unmap() == a {
			return true
		}
	}
	return false
}

// Control is a net.Dialer's Control: it checks the address a socket is
// about to connect to (after any name was resolved, for every redirect)
// and then runs next (nil: nothing more), as network.MarkTenant.
func (p *Policy) Control(next func(network, address string, c syscall.RawConn) error) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return err
		}
		if err := p.Check(a.WithZone("")); err != nil {
			return err
		}
		if next != nil {
			return next(network, address, c)
		}
		return nil
	}
}
