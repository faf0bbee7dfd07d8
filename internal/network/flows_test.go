package network

import (
	"errors"
	"fmt"
	"io"

	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/fdbudget"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestEgressFlowLimits: what sandboxes hold in the egress proxy is
// bounded per sandbox, per team and per node (beyond any, a reset, the
// reason counted), each connection holds the two descriptors it is
// charged in the process's budget, a connection idle past its limit is
// closed at both ends, and a released sandbox's connections are closed at
// once, towards the far end too, and their descriptors given back.
func TestEgressFlowLimits(t *testing.T) {
	testkit.NeedRoot(t, "")
	limits := FlowLimits{PerSandbox: 4, PerTeam: 5, Node: 8, Idle: 2 * time.Second, HalfClosed: 300 * time.Millisecond}
	fds, err := fdbudget.New(1<<20, 1024)
	must(t, err)
	dns := testutil.ServeDNS(t)
	dns.Set("allowed.test", 60, testutil.InternetAddr)
	m, err := New(Config{Range: netip.MustParsePrefix("198.18.254.0/24"), Table: fmt.Sprintf("cove-test-f%d", os.Getpid()), PoolSize: 1, Flows: limits,
		Descriptors: fds, NameServers: []netip.AddrPort{dns.Addr}}, logx.Discard())
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
	proxied := func(team string) *Net {
		n, err := m.Acquire(t.Context(), true)
		must(t, err)
		m.SetTeam(n, team)
		must(t, m.SetRules(n, nil, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}))
		must(t, m.SetDomains(n, []string{"allowed.test"}))
		return n
	}
	// a and b are one team's, other another's.
	a, b, other := proxied("one"), proxied("one"), proxied("two")
	released := false
	defer func() {
		if !released {
			m.Release(a)
		}
		m.Release(b)
		m.Release(other)
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
	// holding waits until the far end holds want connections and n holds
	// its own count in the proxy.
	holding := func(want int64, n *Net, mine int) {
		t.Helper()
		testkit.Eventually(t, 5*time.Second, func() error {
			if got := held.Load(); got != want {
				return fmt.Errorf("the far end holds %d connections, want %d", got, want)
			}
			if got := m.Flows(n); got != mine {
				return fmt.Errorf("Flows = %d, want %d", got, mine)
			}
			return nil
		})
	}
	var mine []net.Conn
	for range limits.PerSandbox {
		mine = append(mine, open(a))
	}
	holding(4, a, 4)
	if c := open(a); !ended(c, 2*time.Second) {
		t.Error("a connection past the sandbox's limit was served")
	}
	// b, of a's team, has the team's room left; other, of another team,
	// room of its own until the node's limit.
	theirs := []net.Conn{open(b)}
	holding(5, b, 1)
	if c := open(b); !ended(c, 2*time.Second) {
		t.Error("a connection past the team's limit was served")
	}
	for range limits.Node - limits.PerTeam {
		theirs = append(theirs, open(other))
	}
	holding(8, other, 3)
	if c := open(other); !ended(c, 2*time.Second) {
		t.Error("a connection past the node's limit was served")
	}
	st := m.FlowStats()
	if st.Open != limits.Node || st.Refused[RefusedSandbox] != 1 || st.Refused[RefusedTeam] != 1 || st.Refused[RefusedNode] != 1 || st.Refused[RefusedDescriptors] != 0 {
		t.Errorf("FlowStats = %+v", st)
	}
	// Each connection holds its two sockets in the budget: the refused
	// ones none.
	if st.Descriptors != 2*limits.Node || fds.InUse() != 2*limits.Node {
		t.Errorf("the proxy holds %d descriptors, the budget counts %d, want %d", st.Descriptors, fds.InUse(), 2*limits.Node)
	}
	for _, c := range theirs {
		if ended(c, 50*time.Millisecond) {
			t.Error("one of b's or other's connections ended")
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
			return fmt.Errorf("the far end still holds %d connections, want b's and other's %d", got, len(theirs))
		}
		if got, want := fds.InUse(), 2*len(theirs); got != want {
			return fmt.Errorf("the budget counts %d descriptors, want %d", got, want)
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
		if held.Load() != 0 || m.FlowStats().Open != 0 || fds.InUse() != 0 {
			return fmt.Errorf("held %d at the far end, %d in the proxy, %d descriptors", held.Load(), m.FlowStats().Open, fds.InUse())
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
	fl := &flow{owner: &flows{}, conns: map[net.Conn]struct{}{}}
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

// TestFlowAccounting: open refuses past each bound, naming it; every
// socket of a flow (the sandbox's, each attached upstream) holds one
// descriptor of the budget, refused at its reserve; closing, detaching
// and ending give each back once.
func TestFlowAccounting(t *testing.T) {
	t.Parallel()
	fds, err := fdbudget.New(1000, 1000-12) // 12 descriptors to share
	if err != nil {
		t.Fatal(err)
	}
	f := newFlows(FlowLimits{PerSandbox: 3, PerTeam: 4, Node: 6}, fds)
	defer f.close()
	conn := func() net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a
	}
	s1, s2, s3, s4 := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.6"), netip.MustParseAddr("198.18.0.10"), netip.MustParseAddr("198.18.0.14")
	var open []*flow
	for i, tc := range []struct {
		src    netip.Addr
		team   string
		refuse string // "": let in
	}{
		{s1, "a", ""}, {s1, "a", ""}, {s1, "a", ""},
		{s1, "a", RefusedSandbox},
		{s2, "a", ""},
		{s2, "a", RefusedTeam},
		{s3, "b", ""},
		{s4, "c", ""},
		{s4, "c", RefusedNode},
	} {
		fl, err := f.open(tc.src, tc.team, conn())
		switch {
		case tc.refuse == "" && err != nil:
			t.Fatalf("open %d (%s, team %s): %v", i, tc.src, tc.team, err)
		case tc.refuse != "" && (!errors.Is(err, errFlowLimit) || !strings.HasSuffix(err.Error(), tc.refuse)):
			t.Fatalf("open %d (%s, team %s): %v, want a refusal for %s", i, tc.src, tc.team, err, tc.refuse)
		case err == nil:
			open = append(open, fl)
		}
	}
	if got := f.stats(); got.Open != 6 || got.Descriptors != 6 || fds.InUse() != 6 {
		t.Fatalf("after six opened: %+v, the budget %d", got, fds.InUse())
	}
	// An upstream each, then the budget is spent: the seventh socket,
	// attached or opened, is refused for descriptors, and closed.
	for _, fl := range open {
		if err := fl.attach(conn()); err != nil {
			t.Fatal(err)
		}
	}
	extra, peer := net.Pipe()
	defer peer.Close()
	if err := open[0].attach(extra); !errors.Is(err, errFlowLimit) {
		t.Fatalf("attach past the budget: %v", err)
	}
	if _, err := peer.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the socket refused was not closed: %v", err)
	}
	f.end(s3, open[4])
	if _, err := f.open(s3, "b", conn()); err != nil {
		t.Fatalf("open once a flow ended: %v", err)
	}
	if _, err := open[5].attachClosing(conn()); err != nil { // the twelfth
		t.Fatal(err)
	}
	if _, err := open[5].attachClosing(conn()); !errors.Is(err, errFlowLimit) {
		t.Fatalf("attachClosing past the budget: %v", err)
	}
	st := f.stats()
	if st.Refused[RefusedSandbox] != 1 || st.Refused[RefusedTeam] != 1 || st.Refused[RefusedNode] != 1 || st.Refused[RefusedDescriptors] != 2 {
		t.Errorf("refusals: %v", st.Refused)
	}
	// A detaching upstream that closes first gives its descriptor back
	// once, and the flow's close does not give it again.
	f.end(s4, open[5])
	up, err := open[0].attachClosing(conn())
	if err != nil {
		t.Fatal(err)
	}
	up.Close()
	up.Close()
	if got := f.stats().Descriptors; got != 9 || fds.InUse() != 9 {
		t.Errorf("after a detached close: %d held, the budget %d, want 9", got, fds.InUse())
	}
	f.closeAll(s1)
	for _, fl := range open[:3] {
		f.end(s1, fl)
	}
	f.end(s2, open[3])
	for src, fls := range f.bySrc {
		for fl := range fls {
			f.end(src, fl)
		}
	}
	if st := f.stats(); st.Open != 0 || st.Descriptors != 0 || fds.InUse() != 0 || len(f.byTeam) != 0 {
		t.Errorf("all ended: %+v, the budget %d, teams %v", st, fds.InUse(), f.byTeam)
	}
}

// TestCopyFlowHoldsNoPipe: a flow's copies between two TCP connections
// move data both ways and hold no descriptor but the sockets: no splice
// pipe while it runs or idles, none kept after.
func TestCopyFlowHoldsNoPipe(t *testing.T) {
	pair := func() (net.Conn, net.Conn) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		near, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		far, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { near.Close(); far.Close() })
		return near, far
	}
	before := pipesOpen(t)
	sandbox, sandboxProxied := pair() // the sandbox's end, the proxy's accepted one
	upProxied, upFar := pair()        // the proxy's dialled one, the far end
	fl := &flow{owner: &flows{}, conns: map[net.Conn]struct{}{sandboxProxied: {}, upProxied: {}}}
	done := make(chan struct{})
	go func() { fl.pipe(sandboxProxied, upProxied); close(done) }()
	// Both ways, more than a buffer each.
	out := strings.Repeat("to the far end ", 20000)
	back := strings.Repeat("to the sandbox ", 20000)
	go func() { _, _ = io.WriteString(sandbox, out) }()
	go func() { _, _ = io.WriteString(upFar, back) }()
	for _, tc := range []struct {
		name string
		c    net.Conn
		want string
	}{{"the far end", upFar, out}, {"the sandbox", sandbox, back}} {
		got := make([]byte, len(tc.want))
		tc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(tc.c, got); err != nil || string(got) != tc.want {
			t.Fatalf("%s read %d bytes (%v)", tc.name, len(got), err)
		}
	}
	if n := pipesOpen(t); n > before {
		t.Errorf("a copying flow holds %d pipe descriptors more", n-before)
	}
	// Ended by the sandbox, then by the far end: both copies end.
	sandbox.(*net.TCPConn).CloseWrite()
	upFar.(*net.TCPConn).CloseWrite()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the copies did not end with both sides")
	}
	fl.close()
	if n := pipesOpen(t); n > before {
		t.Errorf("%d pipe descriptors more after the flow ended", n-before)
	}
}

// pipesOpen counts this process's pipe descriptors.
func pipesOpen(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "pipe:") {
			n++
		}
	}
	return n
}

// TestServeOutlivesAcceptErrors: a failed accept (the process out of
// descriptors) is waited out: the proxy's listener serves on.
func TestServeOutlivesAcceptErrors(t *testing.T) {
	t.Parallel()
	p := &egressProxy{log: logx.Discard()}
	ln := &failingAcceptor{errs: []error{syscall.EMFILE, syscall.ECONNABORTED, net.ErrClosed}}
	done := make(chan struct{})
	go func() { p.serve(ln); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not end with its listener")
	}
	if ln.calls != 3 {
		t.Errorf("serve accepted %d times, want 3: it stopped at a failed accept", ln.calls)
	}
}

// failingAcceptor fails each accept with the next of errs.
type failingAcceptor struct {
	errs  []error
	calls int
}

func (a *failingAcceptor) AcceptTCP() (*net.TCPConn, error) {
	err := a.errs[min(a.calls, len(a.errs)-1)]
	a.calls++
	return nil, err
}
