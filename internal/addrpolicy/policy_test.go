package addrpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
)

// TestCheck: what a policy refuses, with and without the operator's
// ranges, and which refusals no range lifts.
func TestCheck(t *testing.T) {
	t.Parallel()
	own := hostAddr(t)
	node := netip.MustParseAddr("203.0.113.50")
	sandboxes := netip.MustParsePrefix("198.18.0.0/15")
	open := New(Config{Flag: "--registry-allow", Never: func() []netip.Prefix { return []netip.Prefix{sandboxes} },
		Nodes: func() []netip.Addr { return []netip.Addr{node} }})
	allowed := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fe80::/10"),
		netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("224.0.0.0/4"), netip.PrefixFrom(own, own.BitLen()),
		netip.MustParsePrefix("203.0.113.50/32")}
	allowing := New(Config{Flag: "--registry-allow", Allow: allowed, Never: func() []netip.Prefix { return []netip.Prefix{sandboxes} },
		Nodes: func() []netip.Addr { return []netip.Addr{node} }})
	for _, c := range []struct {
		addr string
		why  string // of the refusal without Allow ("" connected to)
		// allowed: connected to with Allow.
		allowed bool
	}{
		{"203.0.113.7", "", true},
		{"2001:db8::1", "", true},
		{"127.0.0.1", "loopback", true},
		{"127.9.8.7", "loopback", true},
		{"::1", "loopback", false},
		{"10.1.2.3", "private", false},
		{"10.20.3.4", "private", true},
		{"172.16.0.1", "private", false},
		{"172.31.255.254", "private", false},
		{"192.168.1.1", "private", false},
		{"100.64.0.1", "shared address space (CGNAT)", false},
		{"100.127.255.254", "shared address space (CGNAT)", false},
		{"169.254.169.254", "link-local", false},
		{"fe80::1", "link-local", true},
		{"fc00::1", "private", false},
		{"fd12:3456::1", "private", false},
		{"fec0::1", "private", false},
		{"192.0.0.170", "reserved", false},
		{"::ffff:127.0.0.1", "loopback", true},
		{"::ffff:10.1.2.3", "private", false},
		{"::ffff:203.0.113.7", "", true},
		{"64:ff9b::a01:203", "private (embedded 10.1.2.3)", false},
		{"2002:a01:203::1", "private (embedded 10.1.2.3)", false},
		{"64:ff9b::cb00:7107", "", true},
		{"0.0.0.0", "unspecified", false},
		{"0.1.2.3", "unspecified", false},
		{"::", "unspecified", false},
		{"::a01:203", "an IPv4-compatible IPv6 address", false},
		{"224.0.0.1", "multicast, broadcast or reserved", false},
		{"239.1.2.3", "multicast, broadcast or reserved", false},
		{"ff02::1", "multicast, broadcast or reserved", false},
		{"255.255.255.255", "multicast, broadcast or reserved", false},
		{"198.18.0.6", "in the sandbox range 198.18.0.0/15", false},
		{own.String(), "this host's own", true},
		{node.String(), "a node's own", true},
	} {
		a := netip.MustParseAddr(c.addr)
		err := open.Check(a)
		var r *Refused
		switch {
		case c.why == "" && err != nil:
			t.Errorf("%s: %v, want connected to", c.addr, err)
		case c.why != "" && (!errors.As(err, &r) || r.Why != c.why || !errs.Is(err, errs.PermissionDenied)):
			t.Errorf("%s: %v, want refused as %s", c.addr, err, c.why)
		}
		if err := allowing.Check(a); (err == nil) != (c.allowed || c.why == "") {
			t.Errorf("%s with %v allowed: %v, want connected to %v", c.addr, allowed, err, c.allowed)
		}
	}
}

// hostAddr is an address of this host's that nothing else refuses (not
// loopback, private or link-local), or the test is skipped.
func hostAddr(t *testing.T) netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	bare := New(Config{})
	for _, ia := range ifs {
		if n, ok := ia.(*net.IPNet); ok {
			a, _ := netip.AddrFromSlice(n.IP)
			if a = a.Unmap(); !a.IsLoopback() && !a.IsPrivate() && !a.IsLinkLocalUnicast() && !cgnat.Contains(a) {
				if r := bare.refused(a); r == nil || r.Why != "this host's own" {
					t.Fatalf("the host's own %s: %v", a, r)
				}
				return a
			}
		}
	}
	t.Skip("the host has no public address")
	return netip.Addr{}
}

// TestControl: a dialer with the policy's Control refuses the address a
// name resolves to, before any packet leaves, and connects where the
// operator allows.
func TestControl(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nexts := 0
	next := func(string, string, syscall.RawConn) error { nexts++; return nil }
	refusing := &net.Dialer{Control: New(Config{Flag: "--x-allow"}).Control(next)}
	for _, addr := range []string{"localhost:" + port, "127.0.0.1:" + port} {
		if c, err := refusing.DialContext(ctx, "tcp4", addr); err == nil {
			c.Close()
			t.Errorf("dial %s: connected", addr)
		} else if !strings.Contains(err.Error(), "loopback") || !strings.Contains(Reason(err), "--x-allow") {
			t.Errorf("dial %s: %v (reason %q)", addr, err, Reason(err))
		}
	}
	allowing := &net.Dialer{Control: New(Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).Control(next)}
	c, err := allowing.DialContext(ctx, "tcp4", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-accepted
	if nexts != 1 {
		t.Errorf("next ran %d times, want once (for the connection made)", nexts)
	}
	if len(accepted) != 0 {
		t.Errorf("a refused dial reached the listener")
	}
}

// TestReason: what a tenant reads of a failure is a fixed phrase, never
// the far end's words.
func TestReason(t *testing.T) {
	t.Parallel()
	secret := "HOST-ONLY-SECRET"
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("get: %w", &net.OpError{Op: "dial", Err: errs.New(errs.PermissionDenied, "%w", &Refused{Addr: netip.MustParseAddr("127.0.0.1"), Why: "loopback", Flag: "--f"})}), "address 127.0.0.1 is loopback: not connected to for a tenant unless the operator allows its range (--f)"},
		{fmt.Errorf("%s: %w", secret, context.DeadlineExceeded), "timed out"},
		{&net.DNSError{Err: secret, Name: "x.test", IsNotFound: true}, "the name does not resolve"},
		{errors.New(secret), "the request failed"},
	} {
		if got := Reason(c.err); got != c.want || strings.Contains(got, secret) {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}
