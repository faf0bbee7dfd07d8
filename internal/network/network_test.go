package network

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// inNS runs fn on a thread inside the network namespace ns.
func inNS(t testing.TB, ns *os.File, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, _ := netns.Get()
		defer orig.Close()
		if err := netns.Set(netns.NsHandle(ns.Fd())); err != nil {
			t.Error(err)
			return
		}
		fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// get fetches http://addr/ from inside network n; "" when it cannot
// connect. The socket is made on a thread inside n (an http.Client would
// dial from another goroutine, outside it).
func get(t *testing.T, n *Net, addr string) string {
	t.Helper()
	var conn net.Conn
	inNS(t, n.NS, func() { conn, _ = net.DialTimeout("tcp", addr, 3*time.Second) })
	if conn == nil {
		return ""
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestEgressAndIsolation(t *testing.T) {
	testkit.NeedRoot(t, "")
	table := fmt.Sprintf("cove-test-%d", os.Getpid())
	m, err := New(Config{Range: netip.MustParsePrefix("198.19.250.0/24"), PoolSize: 2, Table: table}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	var open, closed, neighbour *Net
	defer func() {
		m.Close()
		// ip_forward is host-wide and shared with other nodes (other test
		// packages run at the same time): restoreForwarding owns it.
		// The kernel removes a released network's veth in the background.
		for _, n := range []*Net{open, closed, neighbour} {
			if !testkit.Wait(10*time.Second, func() bool { _, err := netlink.LinkByName(n.Veth); return err != nil }) {
				t.Errorf("veth %s left after its network was released", n.Veth)
			}
		}
		c, _ := nftables.New()
		tables, _ := c.ListTables()
		for _, tb := range tables {
			if tb.Name == table {
				t.Errorf("table %s left after Close", table)
			}
		}
	}()
	testutil.FakeInternet(t) // after New: its network is not one of the host's blocked ones
	ctx := context.Background()
	open, err = m.Acquire(ctx, true)
	must(t, err)
	closed, err = m.Acquire(ctx, false)
	must(t, err)
	neighbour, err = m.Acquire(ctx, true)
	must(t, err)
	defer func() { // before Close (deferred earlier), which then removes the rules
		m.Release(open)
		m.Release(closed)
		m.Release(neighbour)
		m.releasing.Wait() // a network is offered again only after this
		// The released addresses keep no tracked flows for their next owner.
		flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		if err != nil {
			t.Logf("conntrack table not readable here: %v", err)
			return
		}
		for _, f := range flows {
			for _, n := range []*Net{open, closed, neighbour} {
				if f.Forward.SrcIP.Equal(net.IP(n.Addr.AsSlice())) || f.Forward.DstIP.Equal(net.IP(n.Addr.AsSlice())) {
					t.Errorf("a flow of released %s is still tracked: %s", n.Addr, f)
				}
			}
		}
	}()

	// A service on the host (like the API port) and one in the neighbour.
	hostLn, err := net.Listen("tcp", "0.0.0.0:0")
	must(t, err)
	defer hostLn.Close()
	go http.Serve(hostLn, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "host") }))
	hostPort := hostLn.Addr().(*net.TCPAddr).Port
	var nbLn net.Listener
	inNS(t, neighbour.NS, func() { nbLn, err = net.Listen("tcp", "0.0.0.0:8081") })
	must(t, err)
	defer nbLn.Close()
	go http.Serve(nbLn, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "neighbour") }))

	tests := []struct {
		name string
		n    *Net
		url  string
		want string // "" = must not connect
	}{
		{"NAT egress works", open, "203.0.113.1:8080", "hello from 203.0.113.1:8080 to 203.0.113.254"},
		{"no egress without internet", closed, "203.0.113.1:8080", ""},
		{"no metadata service", open, "169.254.169.254:80", ""},
		{"no host service through the gateway", open, fmt.Sprintf("%s:%d", open.Gateway, hostPort), ""},
		{"no host service through the host's address", open, fmt.Sprintf("%s:%d", hostAddr(t), hostPort), ""},
		{"no neighbour", open, fmt.Sprintf("%s:8081", neighbour.Addr), ""},
	}
	for _, tc := range tests {
		if got := get(t, tc.n, tc.url); !strings.Contains(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	// The egress proxy listens only on the gateways of sandboxes with
	// domain rules, and takes only connections redirected to it: not the
	// host's own, nor a sandbox's sent straight to it.
	proxyAddr := fmt.Sprintf("127.0.0.1:%d", m.proxy.port())
	if c, err := net.DialTimeout("tcp", proxyAddr, 3*time.Second); err == nil {
		c.Close()
		t.Errorf("the egress proxy took a connection from the host at %s", proxyAddr)
	}
	if got := get(t, open, fmt.Sprintf("%s:%d", open.Gateway, m.proxy.port())); got != "" {
		t.Errorf("the egress proxy answered a sandbox that was not redirected: %q", got)
	}
	// Rules change live.
	must(t, m.SetInternet(closed, true))
	if got := get(t, closed, "203.0.113.1:8080"); !strings.HasPrefix(got, "hello from 203.0.113.1:8080") {
		t.Errorf("after turning egress on: %q", got)
	}
	// Rules of its own: deny everything but the fake internet host.
	must(t, m.SetRules(neighbour, []netip.Prefix{netip.MustParsePrefix(testutil.InternetAddr + "/32")}, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}))
	if got := get(t, neighbour, testutil.InternetAddr+":8080"); !strings.HasPrefix(got, "hello from") {
		t.Errorf("allowed destination refused: %q", got)
	}
	must(t, m.SetRules(neighbour, []netip.Prefix{netip.MustParsePrefix("203.0.113.99/32")}, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}))
	if got := get(t, neighbour, testutil.InternetAddr+":8080"); got != "" {
		t.Errorf("denied destination reached: %q", got)
	}
	must(t, m.SetRules(neighbour, nil, nil))
	if got := get(t, neighbour, testutil.InternetAddr+":8080"); !strings.HasPrefix(got, "hello from") {
		t.Errorf("after removing the rules: %q", got)
	}
	must(t, m.SetInternet(open, false))
	if got := get(t, open, "203.0.113.1:8080"); got != "" {
		t.Errorf("after turning egress off: %q", got)
	}
}

// hostAddr is one of the host's own non-loopback IPv4 addresses.
func hostAddr(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !strings.HasPrefix(ipn.IP.String(), "203.0.113.") {
			return ipn.IP.String()
		}
	}
	t.Skip("the host has no IPv4 address besides loopback")
	return ""
}

// TestReleasedNetworkComesBackClean: a released network whose namespace was
// kept returns to the pool without its rules, egress setting or flows, and
// works for the next sandbox.
func TestReleasedNetworkComesBackClean(t *testing.T) {
	testkit.NeedRoot(t, "")
	m, err := New(Config{Range: netip.MustParsePrefix("198.19.246.0/24"), Table: fmt.Sprintf("cove-test-c%d", os.Getpid()), PoolSize: 4}, logx.Discard())
	must(t, err)
	defer m.Close()
	testutil.FakeInternet(t)
	n, err := m.Acquire(context.Background(), false)
	must(t, err)
	must(t, m.SetRules(n, nil, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}))
	must(t, m.SetDomains(n, []string{"example.test"}))
	m.Release(n)
	m.releasing.Wait()
	back, err := m.Acquire(context.Background(), true)
	must(t, err)
	defer m.Release(back)
	if back != n {
		t.Fatal("the next sandbox did not get the released network back")
	}
	m.fw.mu.Lock()
	dirty := m.fw.offline[back.Addr] || m.fw.ruled[back.Slot] || m.fw.proxiedAddrs[back.Addr]
	m.fw.mu.Unlock()
	if dirty {
		t.Error("the reused network kept its rules")
	}
	if got := get(t, back, testutil.InternetAddr+":8080"); !strings.HasPrefix(got, "hello from") {
		t.Errorf("the reused network cannot reach out: %q", got)
	}
}

// TestRangeUsedUpWaits: with every network of the range handed out, a
// create waits for one being released rather than fail; with none coming
// back it fails, as unavailable.
func TestRangeUsedUpWaits(t *testing.T) {
	testkit.NeedRoot(t, "")
	m, err := New(Config{Range: netip.MustParsePrefix("198.19.245.0/29"), Table: fmt.Sprintf("cove-test-u%d", os.Getpid()), PoolSize: 1}, logx.Discard())
	must(t, err)
	defer m.Close()
	a, err := m.Acquire(context.Background(), true)
	must(t, err)
	b, err := m.Acquire(context.Background(), true)
	must(t, err)
	defer m.Release(b)
	go func() {
		time.Sleep(50 * time.Millisecond)
		m.Release(a)
	}()
	c, err := m.Acquire(context.Background(), true)
	if err != nil {
		t.Fatalf("a create while a network was on its way back: %v", err)
	}
	defer m.Release(c)
	if _, err := m.Acquire(context.Background(), true); !errors.Is(err, errRangeUsedUp) || errs.KindOf(err) != errs.Unavailable {
		t.Errorf("a create with the range used up: %v, want unavailable", err)
	}
}

// TestResolverPortOnly: a resolver in a blocked range (here the fake
// internet's host, blocked because it is a network of the host's own
// interfaces once it exists before the node starts) is reachable on port
// 53 only, not on its other ports.
func TestResolverPortOnly(t *testing.T) {
	testkit.NeedRoot(t, "")
	testutil.FakeInternet(t)
	testutil.FakeInternetOnHost(t) // before New: its network is one of the host's, so blocked
	m, err := New(Config{Range: netip.MustParsePrefix("198.19.247.0/24"), Table: fmt.Sprintf("cove-test-r%d", os.Getpid()), PoolSize: 1,
		DNS: []netip.Addr{netip.MustParseAddr(testutil.InternetAddr)}}, logx.Discard())
	must(t, err)
	defer m.Close()
	n, err := m.Acquire(context.Background(), true)
	must(t, err)
	defer m.Release(n)
	if got := get(t, n, testutil.InternetAddr+":8080"); got != "" {
		t.Errorf("the resolver's web server answered a sandbox: %q", got)
	}
}
