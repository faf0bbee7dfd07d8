// Package connguard bounds what clients that have not authenticated can
// make a server hold. A connection, from its accept until a request on it
// authenticates (Authenticated), holds one slot of a total cap, one of its
// source address's cap and one descriptor of the process's budget
// (fdbudget, whose reserve stays for the API); past any of them a new
// connection is closed at once. Until it authenticates it waits at most
// Limits.Wait for its first request and between requests. Its Listener
// retries a failed accept (a process out of descriptors) with a backoff
// instead of stopping, and Status says how the listeners fare.
package connguard

import (
	"container/list"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/covesandbox/cove/internal/fdbudget"
)

// Limits bound the connections not yet authenticated.
type Limits struct {
	// Total is how many a server holds at once, all sources together
	// (0: DefaultTotal).
	Total int
	// PerSource is how many one source holds at once: one IPv4 address,
	// one IPv6 /64 (0: DefaultPerSource).
	PerSource int
	// Wait is how long one may take to send its first request (its first
	// byte, a TLS handshake and the request's headers), and may stay idle
	// between requests, before it is closed (0: DefaultWait).
	Wait time.Duration
}

// The default limits: a burst of a hundred concurrent creates from one
// client (each a new connection, authenticated by its first request)
// stays well within them.
const (
	DefaultTotal     = 4096
	DefaultPerSource = 256
	DefaultWait      = 5 * time.Second
)

// Guard counts the connections not yet authenticated of a server's
// listeners, against its Limits and the descriptor budget.
type Guard struct {
	limits Limits
	budget *fdbudget.Budget
	log    *slog.Logger

	mu        sync.Mutex
	held      int
	bySource  map[netip.Prefix]*source
	listeners []*Listener

	refused, evicted atomic.Int64
	lastWarned       atomic.Int64 // unix nanoseconds of the last warning of a refusal
}

// source is what one source holds: its connections, oldest first.
type source struct {
	held  int
	conns list.List // of *Conn
}

// New is a guard of limits (zeros take the defaults) that takes each
// connection's descriptor from budget (nil: no budget).
func New(limits Limits, budget *fdbudget.Budget, log *slog.Logger) (*Guard, error) {
	if limits.Total < 0 || limits.PerSource < 0 || limits.Wait < 0 {
		return nil, fmt.Errorf("unauthenticated connections: caps %d in all and %d per address, wait %s: want 0 (the default) or more",
			limits.Total, limits.PerSource, limits.Wait)
	}
	if limits.Total == 0 {
		limits.Total = DefaultTotal
	}
	if limits.PerSource == 0 {
		limits.PerSource = DefaultPerSource
	}
	if limits.Wait == 0 {
		limits.Wait = DefaultWait
	}
	return &Guard{limits: limits, budget: budget, log: log, bySource: map[netip.Prefix]*source{}}, nil
}

// Wait is how long a connection not yet authenticated may wait.
func (g *Guard) Wait() time.Duration { return g.limits.Wait }

// admit gives c the slots of a connection not yet authenticated, or
// closes it (nil). When the cap in all or the budget is full, a source
// that holds more than c's would gives up its oldest connection to it: a
// flood from a few addresses keeps no other out.
func (g *Guard) admit(c net.Conn) *Conn {
	src := sourceOf(c.RemoteAddr())
	g.mu.Lock()
	s := g.bySource[src]
	if s == nil {
		s = &source{}
		g.bySource[src] = s
	}
	var gc, victim *Conn
	why := ""
	switch {
	case s.held >= g.limits.PerSource:
		why = "too many connections not yet authenticated from one address"
	case g.held < g.limits.Total && g.budget.Take(1):
		g.held++
	default: // its slots are a victim's, if there is one
		if victim = g.evictFor(s); victim == nil {
			why = "too many connections not yet authenticated"
		}
	}
	if why == "" {
		s.held++
		gc = newConn(c, g, src)
		gc.elem = s.conns.PushBack(gc)
	} else if s.held == 0 {
		delete(g.bySource, src)
	}
	g.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
		g.evicted.Add(1)
	}
	if why != "" {
		c.Close()
		g.refused.Add(1)
		g.warnRefused(why, src)
	}
	return gc
}

// evictFor takes, for a new connection of s, the oldest connection of the
// source that holds the most, if it holds more than s would with it; its
// slots pass to the new one. g.mu is held.
func (g *Guard) evictFor(s *source) *Conn {
	var most *source
	for _, o := range g.bySource {
		if most == nil || o.held > most.held {
			most = o
		}
	}
	if most == nil || most.held <= s.held+1 {
		return nil
	}
	victim := most.conns.Front().Value.(*Conn)
	if !victim.take() { // it is giving its slots back already
		return nil
	}
	most.held--
	most.conns.Remove(victim.elem)
	return victim
}

// give returns c's slots.
func (g *Guard) give(c *Conn) {
	g.mu.Lock()
	g.held--
	s := g.bySource[c.src]
	s.conns.Remove(c.elem)
	if s.held--; s.held == 0 {
		delete(g.bySource, c.src)
	}
	g.mu.Unlock()
	g.budget.Give(1)
}

// refuseWarnEvery spaces the warnings of refused connections.
const refuseWarnEvery = time.Minute

func (g *Guard) warnRefused(why string, src netip.Prefix) {
	now := time.Now().UnixNano()
	last := g.lastWarned.Load()
	if now-last < int64(refuseWarnEvery) || !g.lastWarned.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("closing new connections at once: "+why, "source", src.String(), "refused", g.refused.Load(),
		"max", g.limits.Total, "per_address", g.limits.PerSource)
}

// sourceOf is the source a connection counts against: its IPv4 address,
// or its IPv6 address's /64 (one host's, as a provider hands them out).
func sourceOf(a net.Addr) netip.Prefix {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := tcp.AddrPort().Addr().Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// Status is how a guard's listeners fare.
type Status struct {
	Listeners []ListenerStatus
	// Unauthenticated is how many connections not yet authenticated are
	// held now, of at most Max (PerSource from one source).
	Unauthenticated, Max, PerSource int
	// Refused is how many new connections were closed at once, a cap or
	// the budget being full; Evicted how many were closed to make room for
	// one from a source that held fewer.
	Refused, Evicted int64
}

// Status is how g's listeners fare now.
func (g *Guard) Status() Status {
	g.mu.Lock()
	s := Status{Unauthenticated: g.held, Max: g.limits.Total, PerSource: g.limits.PerSource, Refused: g.refused.Load(), Evicted: g.evicted.Load()}
	listeners := append([]*Listener(nil), g.listeners...)
	g.mu.Unlock()
	for _, l := range listeners {
		s.Listeners = append(s.Listeners, l.status())
	}
	return s
}
