package network

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/addrpolicy"
	"github.com/covesandbox/cove/internal/fdbudget"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/svid"
)

// soOriginalDst is SO_ORIGINAL_DST (linux/netfilter_ipv4.h): the address a
// redirected connection was sent to.
const soOriginalDst = 80

// egressProxy enforces allowOut domain names and applies rules'
// transforms. The firewall redirects the TCP ports 80 and 443 of
// sandboxes with domain names or rules here; the proxy reads the name the
// client asks for (TLS SNI, or the HTTP Host header) and checks it, with
// the address the client dialled, against the sandbox's policy. What no
// rule transforms is spliced to that address, never decrypted; what a
// rule transforms is served here (transform).
//
// A redirect arrives at the sandbox's gateway (the address of the host's
// end of its veth), so the proxy listens there, on one port, and only for
// the sandboxes it proxies: no other address of the host has it.
// The port is held by a socket bound on loopback that never listens, so
// nothing else on the host takes it meanwhile.
type egressProxy struct {
	log      *slog.Logger
	blocked  []netip.Prefix // never dialled, whatever the name
	hold     int            // the socket that holds the port
	portNum  uint16
	ca       *egressCA
	secrets  Secrets
	identity atomic.Pointer[svid.Issuer]
	// names tells where the names connections ask for lead; resolver
	// finds upstream proxies; upstreamRoots verify upstreams (nil: the
	// host's roots).
	names         *nameResolver
	resolver      *net.Resolver
	upstreamRoots *x509.CertPool
	upstreams     *addrpolicy.Policy // where upstream proxies may be (upstream_linux.go)

	flows *flows

	mu        sync.RWMutex
	policies  map[netip.Addr]*policy          // sandbox address → what it may do
	listeners map[netip.Addr]*net.TCPListener // gateway → the proxy's listener there
}

func newEgressProxy(blocked []netip.Prefix, ca *egressCA, sec Secrets, limits FlowLimits, fds *fdbudget.Budget, log *slog.Logger) (*egressProxy, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hold a port: %w", err)
	}
	sa := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("hold a port: %w", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("hold a port: %w", err)
	}
	return &egressProxy{log: log, blocked: blocked, hold: fd, portNum: uint16(bound.(*unix.SockaddrInet4).Port), ca: ca, secrets: sec,
		flows: newFlows(limits, fds), resolver: net.DefaultResolver, policies: map[netip.Addr]*policy{}, listeners: map[netip.Addr]*net.TCPListener{}}, nil
}

func (p *egressProxy) port() uint16 { return p.portNum }

func (p *egressProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for gw, ln := range p.listeners {
		ln.Close()
		delete(p.listeners, gw)
	}
	unix.Close(p.hold)
	p.flows.close()
}

// update changes the policy of the sandbox at addr, whose gateway is gw,
// and listens at gw while the sandbox is proxied; it reports whether it
// is.
func (p *egressProxy) update(addr, gw netip.Addr, change func(*policy)) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pol, ok := p.policies[addr]
	if !ok {
		pol = &policy{internet: true}
	}
	next := *pol
	change(&next)
	if !next.proxied() {
		if ln, ok := p.listeners[gw]; ok {
			ln.Close()
			delete(p.listeners, gw)
		}
	} else if _, ok := p.listeners[gw]; !ok {
		ln, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(gw, p.portNum)))
		if err != nil {
			return pol.proxied(), fmt.Errorf("egress proxy at %s: %w", gw, err)
		}
		p.listeners[gw] = ln
		go p.serve(ln)
	}
	p.policies[addr] = &next
	return next.proxied(), nil
}

// forget drops a released sandbox's policy, its listener and its
// connections.
func (p *egressProxy) forget(addr, gw netip.Addr) {
	p.mu.Lock()
	delete(p.policies, addr)
	if ln, ok := p.listeners[gw]; ok {
		ln.Close()
		delete(p.listeners, gw)
	}
	p.mu.Unlock()
	p.flows.closeAll(addr)
}

// policyOf is a copy of a proxied sandbox's policy.
func (p *egressProxy) policyOf(addr netip.Addr) (policy, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	pol, ok := p.policies[addr]
	if !ok || !pol.proxied() {
		return policy{}, false
	}
	return *pol, true
}

// acceptor is what serve takes connections from (a *net.TCPListener).
type acceptor interface {
	AcceptTCP() (*net.TCPConn, error)
}

// serve takes the connections of ln until it is closed. Each is counted
// (flows.open) before its handler starts, so that a sandbox that connects
// without end holds no more descriptors than its limits let it; a failed
// accept (EMFILE, ECONNABORTED …) is waited out, never the end of the
// listener.
func (p *egressProxy) serve(ln acceptor) {
	var wait time.Duration
	for {
		c, err := ln.AcceptTCP()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			p.log.Debug("egress proxy: accept", logx.Err(err), "retry_in", wait)
			time.Sleep(wait)
			continue
		}
		wait = 0
		src, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		addr := src.Addr().Unmap()
		pol, known := p.policyOf(addr)
		if !known {
			c.Close()
			continue // not a sandbox this proxy serves
		}
		fl, err := p.flows.open(addr, pol.team, c)
		if err != nil {
			p.log.Debug("egress refused: too many connections", "sandbox", addr.String(), "team", pol.team, logx.Err(err))
			_ = c.SetLinger(0) // a reset: the client fails at once
			c.Close()
			continue
		}
		go p.handle(c, netip.AddrPortFrom(addr, src.Port()), fl)
	}
}

// handle serves a connection counted as fl.
func (p *egressProxy) handle(c *net.TCPConn, src netip.AddrPort, fl *flow) {
	defer p.flows.end(src.Addr(), fl)
	pol, known := p.policyOf(src.Addr())
	if !known {
		return // released since: forget may have closed its flows before this one counted
	}
	dst, err := originalDst(c)
	if err != nil || p.isBlocked(dst.Addr()) {
		return
	}
	br := bufio.NewReaderSize(c, 16<<10)
	var name string
	if port := dst.Port(); port == 80 || port == 443 { // other ports (tunneled) are judged by address alone
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if name, err = requestedName(br); err != nil {
			name = ""
		}
	}
	// What the name was read from (nothing on other ports: a server may
	// speak first there).
	var overTLS, plain bool
	if br.Buffered() > 0 {
		first, _ := br.Peek(1)
		overTLS = first[0] == 0x16
		plain = !overTLS
	}
	verdict := pol.allows(dst.Addr(), name)
	switch verdict {
	case denied:
		p.log.Debug("egress refused", "sandbox", src.Addr().String(), "name", name, "dst", dst.String(), logx.Err(err))
		return
	case byName:
		if !p.resolvesTo(name, dst.Addr()) {
			// Allowed by name, the connection goes where the name leads
			// on the node, not where the client says it does.
			p.log.Info("egress refused: an allowed name not at the address dialled", "sandbox", src.Addr().String(), "name", name, "dst", dst.String())
			if plain {
				refuse(c, http.StatusForbidden, "cove egress: "+name+" does not resolve to "+dst.Addr().String()+" on this node")
			}
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case name != "" && len(pol.rules.Match(name)) > 0:
		p.transform(fl, c, br, src, dst, strings.TrimSuffix(strings.ToLower(name), "."), overTLS, &pol)
		return
	case verdict == byName && plain:
		// Only the name lets plain HTTP through: each request of the
		// connection is checked, not the first alone.
		p.byName(fl, c, br, src, dst, &pol)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := p.dial(ctx, &pol, dst)
	cancel()
	if err != nil {
		p.log.Debug("egress dial", "sandbox", src.Addr().String(), "dst", dst.String(), logx.Err(err))
		return
	}
	if err := fl.attach(up); err != nil {
		return // closed meanwhile, or no descriptor left
	}
	// What was read to find the name goes first; then the buffer goes.
	head, _ := br.Peek(br.Buffered())
	if _, err := up.Write(head); err != nil {
		return
	}
	fl.pipe(c, up)
}

// closeWrite ends the sending half of a connection that has one (TCP,
// directly or under a SOCKS5 tunnel), else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func (p *egressProxy) isBlocked(a netip.Addr) bool {
	for _, b := range p.blocked {
		if b.Contains(a) {
			return true
		}
	}
	return false
}

// originalDst reads where a redirected connection was going.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var (
		mreq *unix.IPv6Mreq
		serr error
	)
	err = rc.Control(func(fd uintptr) {
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, soOriginalDst)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, err
	}
	// The bytes are a struct sockaddr_in: family, port (big endian), address.
	b := mreq.Multiaddr
	port := binary.BigEndian.Uint16(b[2:4])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), port), nil
}

// requestedName peeks at the first bytes: the SNI of a TLS ClientHello, or
// the Host of an HTTP request. Nothing is consumed.
func requestedName(br *bufio.Reader) (string, error) {
	first, err := br.Peek(1)
	if err != nil {
		return "", err
	}
	if first[0] == 0x16 { // a TLS handshake record
		return sniOf(br)
	}
	return hostOf(br)
}

// sniOf lets crypto/tls parse the ClientHello from peeked bytes and stops
// it at the first callback.
func sniOf(br *bufio.Reader) (string, error) {
	hdr, err := br.Peek(5)
	if err != nil {
		return "", err
	}
	n := 5 + int(binary.BigEndian.Uint16(hdr[3:5]))
	hello, err := br.Peek(n)
	if err != nil {
		return "", err
	}
	var name string
	errDone := errors.New("done")
	srv := tls.Server(readOnlyConn{r: bytes.NewReader(hello)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name = h.ServerName
			return nil, errDone
		},
	})
	_ = srv.Handshake()
	if name == "" {
		return "", errors.New("no server name in the TLS ClientHello")
	}
	return name, nil
}

// hostOf reads the Host of an HTTP/1 request from peeked bytes, waiting
// for more only while the request head is incomplete.
func hostOf(br *bufio.Reader) (string, error) {
	want := 1
	for {
		if _, err := br.Peek(want); err != nil {
			return "", fmt.Errorf("no complete HTTP request head: %w", err)
		}
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(buf[:i+4])))
			if err != nil {
				return "", err
			}
			host := req.Host
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			return host, nil
		}
		if len(buf) >= br.Size() {
			return "", errors.New("HTTP request head too large")
		}
		want = len(buf) + 1 // block for at least one more byte
	}
}

// matchDomain: exact names, and "*.example.com" for any name below it.
func matchDomain(name string, allowed []string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for _, a := range allowed {
		a = strings.ToLower(a)
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(name, "."+suffix) {
				return true
			}
		} else if name == a {
			return true
		}
	}
	return false
}

// readOnlyConn feeds crypto/tls the peeked ClientHello.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c readOnlyConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c readOnlyConn) Write(b []byte) (int, error)      { return 0, io.ErrClosedPipe }
func (c readOnlyConn) Close() error                     { return nil }
func (c readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
func (c readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
