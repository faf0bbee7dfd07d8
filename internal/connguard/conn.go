package connguard

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Conn is an accepted connection: until it authenticates or closes it
// holds its slots, and it is closed when it waits longer than the guard's
// Wait for a request (its first, or the next after one served).
type Conn struct {
	net.Conn
	g    *Guard
	src  netip.Prefix
	elem *list.Element // in its source's list, while held

	mu     sync.Mutex
	held   bool // not yet authenticated nor closed: holds its slots
	active bool // a request is being served
	timer  *time.Timer
}

func newConn(c net.Conn, g *Guard, src netip.Prefix) *Conn {
	gc := &Conn{Conn: c, g: g, src: src, held: true}
	gc.mu.Lock() // the timer may fire before it is set
	gc.timer = time.AfterFunc(g.limits.Wait, gc.expire)
	gc.mu.Unlock()
	return gc
}

// expire closes a connection not yet authenticated that has waited its
// time without a request under way.
func (c *Conn) expire() {
	c.mu.Lock()
	idle := c.held && !c.active
	if idle {
		c.Conn.Close()
	}
	c.mu.Unlock()
	if idle {
		c.release()
	}
}

// setActive notes whether a request is being served: between requests the
// wait starts again.
func (c *Conn) setActive(active bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.held || c.active == active {
		return
	}
	c.active = active
	if active {
		c.timer.Stop()
	} else {
		c.timer.Reset(c.g.limits.Wait)
	}
}

// release gives back c's slots, once: it authenticated or closed.
func (c *Conn) release() {
	if c.take() {
		c.g.give(c)
	}
}

// take takes c's slots from it, if it holds them still.
func (c *Conn) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := c.held
	c.held = false
	c.timer.Stop()
	return held
}

// Close closes the connection and gives back its slots.
func (c *Conn) Close() error {
	c.release()
	return c.Conn.Close()
}

// CloseWrite shuts the connection's writing side, where it has one (a
// server closing gracefully).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// SyscallConn is the socket's, for what peeks at it.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}

// ReadFrom keeps the socket's own copy (sendfile, splice) for responses
// served from files.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// NetConn is the connection underneath.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// of finds the guarded connection under c (a *tls.Conn's, say), nil if
// there is none.
func of(c net.Conn) *Conn {
	for c != nil {
		switch v := c.(type) {
		case *Conn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

type connKey struct{}

// Serve makes srv tell g of its connections' requests and carry each
// connection in its requests' contexts, for Authenticated.
func (g *Guard) Serve(srv *http.Server) {
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if gc := of(c); gc != nil {
			return context.WithValue(ctx, connKey{}, gc)
		}
		return ctx
	}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		gc := of(c)
		if gc == nil {
			return
		}
		switch s {
		case http.StateActive, http.StateHijacked:
			// A hijacked connection keeps its slots until it closes.
			gc.setActive(true)
		case http.StateIdle:
			gc.setActive(false)
		case http.StateClosed:
			gc.release()
		}
	}
}

// Authenticated notes that the request of ctx authenticated (an API key,
// a session, a sandbox's token …): its connection gives back its slots
// and waits no longer than the server's own timeouts say. Without a
// guarded connection in ctx it does nothing.
func Authenticated(ctx context.Context) {
	if gc, ok := ctx.Value(connKey{}).(*Conn); ok {
		gc.release()
	}
}
