package network

import (
	"errors"
	"fmt"
	"io"

	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestEgressFlowLimits: what sandboxes hold in the egress proxy is
// bounded per sandbox and per node (beyond either, a reset), a
// connection idle past its limit is closed at both ends, and a released
// sandbox's connections are closed at once, towards the far end too.
func TestEgressFlowLimits(t *testing.T) {
	testkit.NeedRoot(t, "")
	limits := FlowLimits{PerSandbox: 4, Node: 6, Idle: 2 * time.Second, HalfClosed: 300 * time.Millisecond}
	dns := testutil.ServeDNS(t)
	dns.Set("allowed.test", 60, testutil.InternetAddr)
	m, err := New(Config{Range: netip.MustParsePrefix("198.18.254.0/24"), Table: fmt.Sprintf("cove-test-f%d", os.Getpid()), PoolSize: 1, Flows: limits,
		NameServers: []netip.AddrPort{dns.Addr}}, logx.Discard())
	must(t, err)
	defer m.Close()
	ns := testutil.FakeInternet(t)
	// The far end (port 443, taking a plain request head as the proxy
	// does) reads and never answers nor closes; held counts the
	// connections whose end it has not seen.
	ln, err := testutil.ListenIn(ns, testutil.InternetAddr+":443")
	must(t, err)
	defer ln.Close()
	var held atomic.Int64
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held.Add(1)
			go func() { _, _ = io.Copy(io.Discard, c); held.Add(-1); <-quit; c.Close() }()
		}
	}()
	proxied := func() *Net {
		n, err := m.Acquire(t.Context(), true)
		must(t, err)
		must(t, m.SetRules(n, nil, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}))
		must(t, m.SetDomains(n, []string{"allowed.test"}))
		return n
	}
	a, b := proxied(), proxied()
	released := false
	defer func() {
		if !released {
			m.Release(a)
		}
		m.Release(b)
	}()
	// open connects from n and sends a request head for an allowed name;
	// nil when the connection was reset as it opened.
	open := func(n *Net) net.Conn {
		var c net.Conn
		inNS(t, n.NS, func() {
			c, err = net.DialTimeout("tcp", testutil.InternetAddr+":443", 3*time.Second)
		})
		if errors.Is(err, syscall.ECONNRESET) {
			return nil
		}
		must(t, err)
		t.Cleanup(func() { c.Close() })
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
		return c
	}
	// ended says whether the proxy closed or reset c within wait.
	ended := func(c net.Conn, wait time.Duration) bool {
		if c == nil {
			return true
		}
		c.SetReadDeadline(time.Now().Add(wait))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	var mine []net.Conn
	for range limits.PerSandbox {
		mine = append(mine, open(a))
	}
	testkit.Eventually(t, 5*time.Second, func() error {
		if got := held.Load(); got != int64(limits.PerSandbox) {
			return fmt.Errorf("the far end holds %d connections, want %d", got, limits.PerSandbox)
		}
		return nil
	})
	if got := m.Flows(a); got != limits.PerSandbox {
		t.Errorf("Flows = %d, want %d", got, limits.PerSandbox)
	}
	if c := open(a); !ended(c, 2*time.Second) {
		t.Error("a connection past the sandbox's limit was served")
	}
	// b has room of its own until the node's limit.
	var theirs []net.Conn
	for range limits.Node - limits.PerSandbox {
		theirs = append(theirs, open(b))
	}
	testkit.Eventually(t, 5*time.Second, func() error {
		if got := m.Flows(b); got != limits.Node-limits.PerSandbox {
			return fmt.Errorf("b holds %d", got)
		}
		return nil
	})
	if c := open(b); !ended(c, 2*time.Second) {
		t.Error("a connection past the node's limit was served")
	}
	st := m.FlowStats()
	if st.Open != limits.Node || st.Refused[RefusedSandbox] != 1 || st.Refused[RefusedNode] != 1 {
		t.Errorf("FlowStats = %+v", st)
	}
	for _, c := range theirs {
		if ended(c, 50*time.Millisecond) {
			t.Error("one of b's connections ended")
		}
	}
	// Released, a's connections end at once, at both ends.
	start := time.Now()
	m.Release(a)
	released = true
	for _, c := range mine {
		if !ended(c, time.Second) {
			t.Error("a connection of a released sandbox is still open")
		}
		c.Close()
	}
	testkit.Eventually(t, 5*time.Second, func() error {
		if got := held.Load(); got != int64(len(theirs)) {
			return fmt.Errorf("the far end still holds %d connections, want b's %d", got, len(theirs))
		}
		return nil
	})
	if d := time.Since(start); d > limits.Idle {
		t.Errorf("released connections took %v to close, as long as the idle timeout", d)
	}
	// Idle: b's connections moved nothing, and end.
	for _, c := range theirs {
		if !ended(c, 3*limits.Idle) {
			t.Error("an idle connection outlived the idle timeout")
		}
		c.Close()
	}
	testkit.Eventually(t, 5*time.Second, func() error {
		if held.Load() != 0 || m.FlowStats().Open != 0 {
			return fmt.Errorf("held %d at the far end, %d in the proxy", held.Load(), m.FlowStats().Open)
		}
		return nil
	})
	// Half closed: the sandbox ends its sending half; the far end never
	// answers nor closes: both end after HalfClosed, not after Idle.
	c := open(b)
	testkit.Eventually(t, 5*time.Second, func() error {
		if held.Load() != 1 {
			return errors.New("not yet at the far end")
		}
		return nil
	})
	start = time.Now()
	c.(*net.TCPConn).CloseWrite()
	if !ended(c, 3*limits.Idle) {
		t.Error("a half-closed connection outlived the idle timeout")
	}
	if d := time.Since(start); d >= limits.Idle {
		t.Errorf("a half-closed connection took %v to end, want about %v", d, limits.HalfClosed)
	}
	c.Close()
}

// TestTenantMarkKeptOffSandboxes: a socket of the server's tenant
// requests (TenantMark) cannot reach a sandbox's listener, which the
// server's own unmarked sockets (the sandbox proxy's) reach.
func TestTenantMarkKeptOffSandboxes(t *testing.T) {
	testkit.NeedRoot(t, "")
	m, err := New(Config{Range: netip.MustParsePrefix("198.18.249.0/24"), Table: fmt.Sprintf("cove-test-m%d", os.Getpid()), PoolSize: 1}, logx.Discard())
	must(t, err)
	defer m.Close()
	n, err := m.Acquire(t.Context(), true)
	must(t, err)
	defer m.Release(n)
	var ln net.Listener
	inNS(t, n.NS, func() { ln, err = net.Listen("tcp4", n.Addr.String()+":8000") })
	must(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("inside"))
			c.Close()
		}
	}()
	reach := func(d *net.Dialer) string {
		c, err := d.Dial("tcp4", n.Addr.String()+":8000")
		if err != nil {
			return "refused"
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		return string(b)
	}
	if got := reach(&net.Dialer{Timeout: 3 * time.Second}); got != "inside" {
		t.Fatalf("the server's own connection to the sandbox: %q", got)
	}
	if got := reach(&net.Dialer{Timeout: 3 * time.Second, Control: MarkTenant}); got != "refused" {
		t.Errorf("a tenant's request reached a sandbox: %q", got)
	}
}

// TestFlowCloseDetaching: closing a flow closes every connection it holds,
// those that leave it when closed (an HTTP transport's upstreams) too, and
// a connection attached after is closed at once.
func TestFlowCloseDetaching(t *testing.T) {
	fl := &flow{conns: map[net.Conn]struct{}{}}
	a, aPeer := net.Pipe()
	defer aPeer.Close()
	b, bPeer := net.Pipe()
	defer bPeer.Close()
	if err := fl.attach(a); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.attachClosing(b); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { fl.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("closing a flow with a detaching connection hung")
	}
	for name, peer := range map[string]net.Conn{"attached": aPeer, "detaching": bPeer} {
		if _, err := peer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("the %s connection's peer read %v, want EOF", name, err)
		}
	}
	c, cPeer := net.Pipe()
	defer cPeer.Close()
	if err := fl.attach(c); !errors.Is(err, net.ErrClosed) {
		t.Errorf("attach to a closed flow: %v", err)
	}
}
