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

// EgressProxy is an upstream SOCKS5 proxy (RFC 1928, with RFC 1929
// credentials when Username is set) that a sandbox's outbound TCP goes
// through, from the node: the sandbox neither reaches it nor sees its
// credentials (E2B's SandboxEgressProxyConfig).
type EgressProxy struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Check checks an upstream proxy's form: host:port, credentials of at
// most 255 bytes, a password only with a username.
func (e *EgressProxy) Check() error {
	host, port, err := net.SplitHostPort(e.Address)
	if err != nil || host == "" {
		return errs.New(errs.InvalidArgument, "egressProxy.address %q: want host:port", e.Address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errs.New(errs.InvalidArgument, "egressProxy.address %q: a port from 1 to 65535", e.Address)
	}
	if len(e.Username) > 255 || len(e.Password) > 255 {
		return errs.New(errs.InvalidArgument, "egressProxy: a username and a password have at most 255 bytes")
	}
	if e.Password != "" && e.Username == "" {
		return errs.New(errs.InvalidArgument, "egressProxy: a password needs a username")
	}
	return nil
}

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
	d, err := proxy.SOCKS5("tcp4", at.String(), auth, &direct)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", pol.upstream.Address, err)
	}
	c, err := d.(proxy.ContextDialer).DialContext(ctx, "tcp4", dst.String())
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", pol.upstream.Address, err)
	}
	return c, nil
}
