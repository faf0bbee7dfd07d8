package network

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/net/proxy"

	"github.com/covesandbox/cove/internal/errs"
)

// resolveUpstream finds the address the node dials for an upstream proxy,
// again at each connection (a name is pinned for that connection): an
// IPv4 address outside the ranges sandboxes may never reach, so that a
// sandbox cannot have the node open connections to the host's or private
// network's services through it.
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
		if a = a.Unmap(); !p.isBlocked(a) {
			return netip.AddrPortFrom(a, uint16(n)), nil
		}
	}
	return netip.AddrPort{}, errs.New(errs.InvalidArgument, "egressProxy.address %q is in a private, loopback, link-local or this host's range, which sandboxes may not reach", e.Address)
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
	var forward proxy.Dialer = &direct
	if t := pol.upstream.TLS; t != nil {
		forward = &tlsDialer{cfg: t.tlsConfig(pol.upstream.Address, p.upstreamRoots)}
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
