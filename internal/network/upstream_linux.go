package network

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"golang.org/x/net/proxy"

	"github.com/covesandbox/cove/internal/addrpolicy"
	"github.com/covesandbox/cove/internal/errs"
)

// upstreamPolicy is where an upstream proxy may be, by the address
// policy of every request made for a tenant (addrpolicy): besides the
// ranges sandboxes never reach (isBlocked), not the host's own addresses
// (those it has now, not only its networks at the start) nor a node's,
// unless the operator lets sandboxes reach their range (--network-allow).
func upstreamPolicy(cfg Config) *addrpolicy.Policy {
	return addrpolicy.New(addrpolicy.Config{Allow: cfg.Allow, Flag: "--network-allow", Nodes: cfg.Nodes,
		Never: func() []netip.Prefix { return []netip.Prefix{cfg.Range} }})
}

// upstreamAllowed reports whether the node may dial an upstream proxy at a.
func (p *egressProxy) upstreamAllowed(a netip.Addr) bool {
	return !p.isBlocked(a) && (p.upstreams == nil || p.upstreams.Check(a) == nil)
}

// resolveUpstream finds the address the node dials for an upstream proxy,
// again at each connection (a name is pinned for that connection): an
// IPv4 address outside the ranges sandboxes may never reach and allowed
// by the address policy, so that a sandbox cannot have the node open
// connections to the host's, a node's or the private network's services
// through it.
func (p *egressProxy) resolveUpstream(ctx context.Context, e *EgressProxy) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(e.Address)
	if err != nil {
		return netip.AddrPort{}, errs.New(errs.InvalidArgument, "egressProxy.address %q: want host:port", e.Address)
	}
	n, _ := strconv.Atoi(port)
	addrs, err := p.resolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, errs.New(errs.InvalidArgument, "egressProxy.address %q does not resolve: %v", e.Address, err)
	}
	for _, a := range addrs {
		if a = a.Unmap(); p.upstreamAllowed(a) {
			return netip.AddrPortFrom(a, uint16(n)), nil
		}
	}
	return netip.AddrPort{}, errs.New(errs.InvalidArgument, "egressProxy.address %q is in a private, loopback, link-local, this host's or a node's range, which sandboxes may not reach", e.Address)
}

// dial connects to dst for a sandbox: directly, or through its upstream
// proxy.
func (p *egressProxy) dial(ctx context.Context, pol *policy, dst netip.AddrPort) (net.Conn, error) {
	var direct net.Dialer
	if pol.upstream == nil {
		return direct.DialContext(ctx, "tcp4", dst.String())
	}
	at, err := p.resolveUpstream(ctx, pol.upstream)
	if err != nil {
		return nil, err
	}
	var auth *proxy.Auth
	if pol.upstream.Username != "" {
		auth = &proxy.Auth{User: pol.upstream.Username, Password: pol.upstream.Password}
	}
	// The address connected to is checked again as the socket connects.
	checked := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		if ap, err := netip.ParseAddrPort(address); err != nil || !p.upstreamAllowed(ap.Addr().Unmap()) {
			return errs.New(errs.PermissionDenied, "egress proxy %s: address %s refused", pol.upstream.Address, address)
		}
		return nil
	}}
	var forward proxy.Dialer = &checked
	if t := pol.upstream.TLS; t != nil {
		forward = &tlsDialer{Dialer: checked, cfg: t.tlsConfig(pol.upstream.Address, p.upstreamRoots)}
	}
	d, err := proxy.SOCKS5("tcp4", at.String(), auth, forward)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", pol.upstream.Address, err)
	}
	c, err := d.(proxy.ContextDialer).DialContext(ctx, "tcp4", dst.String())
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", pol.upstream.Address, err)
	}
	return c, nil
}
