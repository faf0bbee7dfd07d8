package testutil

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"

	"github.com/vishvananda/netns"
)

// SOCKS is a SOCKS5 server of the fake internet (RFC 1928 CONNECT, with
// RFC 1929 username and password when User is set) that records what it
// was asked to reach: an upstream egress proxy a node tunnels through.
type SOCKS struct {
	Addr       string
	User, Pass string

	mu      sync.Mutex
	reached []string
}

// Reached lists the destinations it connected, each as "user@host:port".
func (s *SOCKS) Reached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reached...)
}

// ServeSOCKS starts a SOCKS5 server at addr in ns until the test ends.
func ServeSOCKS(t testing.TB, ns netns.NsHandle, addr, user, pass string) *SOCKS {
	t.Helper()
	ln, err := ListenIn(ns, addr)
	if err != nil {
		t.Fatal(err)
	}
	return serveSOCKS(t, ln, addr, user, pass)
}

// ServeSOCKSTLS is ServeSOCKS over TLS, with the upstream's certificate
// (of the names NewUpstream was given): E2B's egressProxy.tls.
func (u *Upstream) ServeSOCKSTLS(t testing.TB, ns netns.NsHandle, addr, user, pass string) *SOCKS {
	t.Helper()
	ln, err := ListenIn(ns, addr)
	if err != nil {
		t.Fatal(err)
	}
	return serveSOCKS(t, tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{u.cert}}), addr, user, pass)
}

func serveSOCKS(t testing.TB, ln net.Listener, addr, user, pass string) *SOCKS {
	t.Cleanup(func() { ln.Close() })
	s := &SOCKS{Addr: addr, User: user, Pass: pass}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *SOCKS) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	head := make([]byte, 2)
	if _, err := io.ReadFull(br, head); err != nil || head[0] != 5 {
		return
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	who := ""
	if s.User == "" {
		c.Write([]byte{5, 0})
	} else {
		c.Write([]byte{5, 2})
		// RFC 1929: version 1, ulen, user, plen, pass.
		ver, _ := br.ReadByte()
		ulen, _ := br.ReadByte()
		u := make([]byte, ulen)
		io.ReadFull(br, u)
		plen, _ := br.ReadByte()
		p := make([]byte, plen)
		io.ReadFull(br, p)
		if ver != 1 || string(u) != s.User || string(p) != s.Pass {
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
		who = string(u)
	}
	req := make([]byte, 4)
	if _, err := io.ReadFull(br, req); err != nil || req[1] != 1 || req[3] != 1 { // CONNECT to an IPv4 address
		c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	rest := make([]byte, 6)
	if _, err := io.ReadFull(br, rest); err != nil {
		return
	}
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(rest[:4])), binary.BigEndian.Uint16(rest[4:]))
	up, err := net.Dial("tcp", dst.String())
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	defer up.Close()
	s.mu.Lock()
	s.reached = append(s.reached, who+"@"+dst.Addr().String()+":"+strconv.Itoa(int(dst.Port())))
	s.mu.Unlock()
	c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, br); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}
