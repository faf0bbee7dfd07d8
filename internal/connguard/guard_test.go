package connguard

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/fdbudget"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// flaky is a listener whose first accepts fail with errs, one each.
type flaky struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (f *flaky) Accept() (net.Conn, error) {
	f.mu.Lock()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		f.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: err}
	}
	f.mu.Unlock()
	return f.Listener.Accept()
}

func newGuard(t *testing.T, l Limits, b *fdbudget.Budget) *Guard {
	t.Helper()
	g, err := New(l, b, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAcceptRetries: accepts that fail, as a process out of descriptors
// makes them, are retried: the listener serves the connection after them
// and counts them.
func TestAcceptRetries(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fails := []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED}
	g := newGuard(t, Limits{}, nil)
	ln := g.Listen(&flaky{Listener: tcp, errs: fails})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") })}
	g.Serve(srv)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	resp, err := http.Get("http://" + tcp.Addr().String())
	if err != nil {
		t.Fatalf("a request after %d failed accepts: %v", len(fails), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "served" {
		t.Fatalf("answer %q", body)
	}
	st := g.Status()
	if len(st.Listeners) != 1 || !st.Listeners[0].Accepting || st.Listeners[0].AcceptErrors != int64(len(fails)) ||
		st.Listeners[0].LastError == "" {
		t.Errorf("status after the failures: %+v", st.Listeners)
	}
	srv.Close()
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
}

// TestCloseEndsBackoff: a listener whose accepts keep failing says so,
// and Close ends its Accept.
func TestCloseEndsBackoff(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fails := make([]error, 1000)
	for i := range fails {
		fails[i] = syscall.EMFILE
	}
	g := newGuard(t, Limits{}, nil)
	ln := g.Listen(&flaky{Listener: tcp, errs: fails})
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	if !testkit.Wait(10*time.Second, func() bool { s := g.Status().Listeners[0]; return !s.Accepting && s.AcceptErrors >= 3 }) {
		t.Fatalf("status while accepts fail: %+v", g.Status().Listeners)
	}
	ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	if g.Status().Listeners[0].Accepting {
		t.Error("a closed listener says it accepts")
	}
}

// closed counts the connections the server closed (a read ends at once
// rather than waiting).
func closed(conns []net.Conn) int {
	return len(conns) - testkit.StillOpen(conns, 50*time.Millisecond)
}

// TestCaps: connections not yet authenticated are held up to the cap per
// address, the cap in all and the descriptor budget's shared part; past
// one a new connection is closed at once. One that authenticates gives
// its slots back.
func TestCaps(t *testing.T) {
	t.Parallel()
	budget, err := fdbudget.New(1000, 990) // 10 shared
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		limits  Limits
		budget  *fdbudget.Budget
		sources []string // one connection from each, in turn
		held    int
	}{
		{"per address", Limits{Total: 100, PerSource: 3, Wait: time.Minute}, nil, []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.3"}, 4},
		{"in all", Limits{Total: 4, PerSource: 100, Wait: time.Minute}, nil, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"}, 4},
		{"descriptors", Limits{Total: 100, PerSource: 100, Wait: time.Minute}, budget, []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2",
			"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t, tc.limits, tc.budget)
			tcp, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln := g.Listen(tcp)
			defer ln.Close()
			accepted := make(chan *Conn, len(tc.sources))
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted <- c.(*Conn)
				}
			}()
			var conns []net.Conn
			for _, src := range tc.sources {
				conns = append(conns, testkit.DialFrom(t, src, tcp.Addr().String(), 1)...)
			}
			if !testkit.Wait(10*time.Second, func() bool { s := g.Status(); return s.Unauthenticated+int(s.Refused) == len(tc.sources) }) {
				t.Fatalf("status: %+v", g.Status())
			}
			if s := g.Status(); s.Unauthenticated != tc.held || s.Refused != int64(len(tc.sources)-tc.held) {
				t.Errorf("held %d, refused %d; want %d held", s.Unauthenticated, s.Refused, tc.held)
			}
			if n := closed(conns); n != len(tc.sources)-tc.held {
				t.Errorf("%d connections closed, want %d", n, len(tc.sources)-tc.held)
			}
			if tc.budget != nil && tc.budget.InUse() != tc.held {
				t.Errorf("descriptors in use %d, want %d", tc.budget.InUse(), tc.held)
			}
			// One authenticates: its slots go back, and a new connection
			// from the same address is held.
			first := <-accepted
			Authenticated(context.WithValue(t.Context(), connKey{}, first))
			if s := g.Status(); s.Unauthenticated != tc.held-1 {
				t.Fatalf("after one authenticated: held %d", s.Unauthenticated)
			}
			again := testkit.DialFrom(t, tc.sources[0], tcp.Addr().String(), 1)
			if !testkit.Wait(10*time.Second, func() bool { return g.Status().Unauthenticated == tc.held }) || closed(again) != 0 {
				t.Errorf("a new connection after one authenticated: %+v", g.Status())
			}
			// Closing gives every slot back, the authenticated one's once.
			first.Close()
			for range tc.held {
				(<-accepted).Close()
			}
			if s := g.Status(); s.Unauthenticated != 0 || tc.budget != nil && tc.budget.InUse() != 0 {
				t.Errorf("after all closed: held %d, descriptors %d", s.Unauthenticated, tc.budget.InUse())
			}
		})
	}
}

// TestWait: a connection that sends no request within the wait is closed,
// and one served goes idle and is closed after the wait too, unless a
// request on it authenticated.
func TestWait(t *testing.T) {
	t.Parallel()
	g := newGuard(t, Limits{Wait: 200 * time.Millisecond}, nil)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" {
			Authenticated(r.Context())
		}
		io.WriteString(w, "ok")
	})}
	g.Serve(srv)
	go srv.Serve(g.Listen(tcp))
	t.Cleanup(func() { srv.Close() })
	addr := tcp.Addr().String()

	silent := testkit.DialFrom(t, "127.0.0.2", addr, 1)
	get := func(path string) net.Conn {
		c := testkit.DialFrom(t, "127.0.0.3", addr, 1)[0]
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return c
	}
	idle, authed := get("/public"), get("/login")
	if !testkit.Wait(10*time.Second, func() bool { return closed(silent) == 1 && closed([]net.Conn{idle}) == 1 }) {
		t.Fatal("a silent or idle connection not yet authenticated stayed open")
	}
	if closed([]net.Conn{authed}) != 0 {
		t.Error("an authenticated idle connection was closed")
	}
	if s := g.Status(); s.Unauthenticated != 0 {
		t.Errorf("held %d after they were closed", s.Unauthenticated)
	}
}

// TestEviction: when the cap in all is full, a connection from a source
// that holds fewer takes the slots of the oldest connection of the source
// that holds the most; from a source that holds as many it is refused.
func TestEviction(t *testing.T) {
	t.Parallel()
	g := newGuard(t, Limits{Total: 6, PerSource: 5, Wait: time.Minute}, nil)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := g.Listen(tcp)
	defer ln.Close()
	go func() {
		for {
			if _, err := ln.Accept(); err != nil {
				return
			}
		}
	}()
	addr := tcp.Addr().String()
	settled := func(n int) {
		t.Helper()
		if !testkit.Wait(10*time.Second, func() bool { s := g.Status(); return s.Unauthenticated+int(s.Refused+s.Evicted) == n }) {
			t.Fatalf("status: %+v", g.Status())
		}
	}
	flood := testkit.DialFrom(t, "127.0.0.2", addr, 5)
	settled(5)
	other := testkit.DialFrom(t, "127.0.0.3", addr, 1)
	settled(6)
	// Full: 127.0.0.4, holding none, takes 127.0.0.2's oldest.
	first := testkit.DialFrom(t, "127.0.0.4", addr, 1)
	settled(7)
	if s := g.Status(); s.Unauthenticated != 6 || s.Evicted != 1 || s.Refused != 0 {
		t.Errorf("after an eviction: %+v", s)
	}
	if closed(flood[:1]) != 1 || closed(flood[1:]) != 0 || closed(other) != 0 || closed(first) != 0 {
		t.Error("the eviction closed another connection than the flood's oldest")
	}
	// Another from 127.0.0.4 (which holds 2 then, 127.0.0.2 3); the next
	// would leave both holding 3: refused.
	again := testkit.DialFrom(t, "127.0.0.4", addr, 2)
	settled(9)
	if s := g.Status(); s.Unauthenticated != 6 || s.Evicted != 2 || s.Refused != 1 || closed(again[:1]) != 0 || closed(again[1:]) != 1 {
		t.Errorf("evictions until both hold as many: %+v", s)
	}
}
