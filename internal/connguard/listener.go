package connguard

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/logx"
)

// The backoff after a failed accept, as net/http's Serve has it: 5 ms,
// doubling up to a second.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// Listener accepts connections for a guard: each holds its slots until it
// authenticates or closes, and a connection past a cap is closed at once.
// An accept that fails (EMFILE, ENFILE, ENOBUFS, ECONNABORTED …) is
// retried after a backoff: only Close stops it.
type Listener struct {
	net.Listener
	g    *Guard
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	failing bool // the last accept failed
	errs    int64
	lastErr error
	lastAt  time.Time
	since   time.Time // the first failure of the current run
}

// Listen guards ln: connections from it count against g.
func (g *Guard) Listen(ln net.Listener) *Listener {
	l := &Listener{Listener: ln, g: g, done: make(chan struct{})}
	g.mu.Lock()
	g.listeners = append(g.listeners, l)
	g.mu.Unlock()
	return l
}

// Accept returns the next connection a cap admits.
func (l *Listener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			l.accepted()
			delay = 0
			if gc := l.g.admit(c); gc != nil {
				return gc, nil
			}
			continue
		}
		select {
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		delay = min(max(2*delay, minBackoff), maxBackoff)
		l.failed(err, delay)
		t := time.NewTimer(delay)
		select {
		case <-l.done:
			t.Stop()
			return nil, net.ErrClosed
		case <-t.C:
		}
	}
}

// Close stops accepting, a backoff under way too; connections already
// accepted stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *Listener) failed(err error, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.errs++
	l.lastErr, l.lastAt = err, now
	if !l.failing {
		l.failing, l.since = true, now
		l.g.log.Warn("accepting connections fails: retrying with a backoff", "addr", l.Addr().String(), logx.Err(err), "retry_in", delay)
	}
}

func (l *Listener) accepted() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		l.failing = false
		l.g.log.Info("accepting connections again", "addr", l.Addr().String(), "after", time.Since(l.since).Round(time.Millisecond), "accept_errors", l.errs)
	}
}

// ListenerStatus is how one listener fares.
type ListenerStatus struct {
	Addr string
	// Accepting is false while its accepts fail (it retries).
	Accepting bool
	// AcceptErrors counts the accepts that failed since it started, the
	// last one LastError at LastErrorAt.
	AcceptErrors int64
	LastError    string
	LastErrorAt  time.Time
}

func (l *Listener) status() ListenerStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ListenerStatus{Addr: l.Addr().String(), AcceptErrors: l.errs, LastErrorAt: l.lastAt}
	select {
	case <-l.done:
	default:
		s.Accepting = !l.failing
	}
	if l.lastErr != nil {
		s.LastError = l.lastErr.Error()
	}
	return s
}
