package network

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FlowLimits bound what sandboxes hold in the egress proxy: each proxied
// connection costs the node two sockets (the sandbox's and the one it
// dials) and the buffers that copy between them, charged to no sandbox's
// cgroup, so they are counted here instead.
type FlowLimits struct {
	// PerSandbox is how many connections one sandbox may hold in the
	// proxy at once; more are refused (reset). Default 256.
	PerSandbox int
	// Node is how many the proxy holds for all sandboxes together.
	// Default: a sixth of the process's descriptor limit (two or three
	// descriptors a connection, half the limit kept for the API, the
	// agents' connections and files), at most 16384.
	Node int
	// Idle closes a connection that moved no byte either way for so
	// long. Default 5 minutes (a cloud NAT's idle timeout is of that
	// order); once one direction has ended, the other gets HalfClosed.
	Idle time.Duration
	// HalfClosed is how long a connection whose one direction ended may
	// stay idle in the other before both are closed. Default 30 s.
	HalfClosed time.Duration
}

func (l FlowLimits) withDefaults() FlowLimits {
	if l.PerSandbox <= 0 {
		l.PerSandbox = 256
	}
	if l.Node <= 0 {
		l.Node = defaultNodeFlows()
	}
	if l.Idle <= 0 {
		l.Idle = 5 * time.Minute
	}
	if l.HalfClosed <= 0 {
		l.HalfClosed = 30 * time.Second
	}
	l.HalfClosed = min(l.HalfClosed, l.Idle)
	return l
}

// defaultNodeFlows: a sixth of RLIMIT_NOFILE, between 64 and 16384.
func defaultNodeFlows() int {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return int(min(max(r.Cur/6, 64), 16384))
}

// Refusal reasons, as the metrics name them.
const (
	RefusedSandbox = "sandbox" // the sandbox holds FlowLimits.PerSandbox
	RefusedNode    = "node"    // the node holds FlowLimits.Node
)

// errFlowLimit is a connection refused for a limit.
var errFlowLimit = errors.New("egress connection limit")

// flows counts and owns the proxy's connections by sandbox address: it
// refuses those past the limits, closes those idle for too long (a reaper
// that wakes a few times per idle period and asks the kernel when each
// socket last sent or received data, so copies keep the kernel's splice),
// and closes all of a sandbox's at once when it is released or paused.
type flows struct {
	limits FlowLimits

	mu    sync.Mutex
	total int
	bySrc map[netip.Addr]map[*flow]struct{}

	refused [2]atomic.Uint64 // RefusedSandbox, RefusedNode
	stop    chan struct{}
	done    chan struct{}
}

func newFlows(l FlowLimits) *flows {
	f := &flows{limits: l.withDefaults(), bySrc: map[netip.Addr]map[*flow]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	go f.reaper()
	return f
}

// flow is one proxied connection: the sandbox's end and every connection
// opened upstream for it.
type flow struct {
	halfClosed atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// open counts a new connection from src, or refuses it (errFlowLimit).
func (f *flows) open(src netip.Addr, c net.Conn) (*flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mine := f.bySrc[src]
	switch {
	case len(mine) >= f.limits.PerSandbox:
		f.refused[0].Add(1)
		return nil, errFlowLimit
	case f.total >= f.limits.Node:
		f.refused[1].Add(1)
		return nil, errFlowLimit
	}
	if mine == nil {
		mine = map[*flow]struct{}{}
		f.bySrc[src] = mine
	}
	fl := &flow{conns: map[net.Conn]struct{}{c: {}}}
	mine[fl] = struct{}{}
	f.total++
	return fl, nil
}

// end stops counting a connection from src, closing what it still holds.
func (f *flows) end(src netip.Addr, fl *flow) {
	fl.close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if mine := f.bySrc[src]; mine != nil {
		if _, ok := mine[fl]; ok {
			delete(mine, fl)
			f.total--
		}
		if len(mine) == 0 {
			delete(f.bySrc, src)
		}
	}
}

// closeAll closes every connection src holds (its sandbox was released or
// paused); the handlers that served them stop counting them as they end.
func (f *flows) closeAll(src netip.Addr) {
	f.mu.Lock()
	list := make([]*flow, 0, len(f.bySrc[src]))
	for fl := range f.bySrc[src] {
		list = append(list, fl)
	}
	f.mu.Unlock()
	for _, fl := range list {
		fl.close()
	}
}

// count is how many connections src holds.
func (f *flows) count(src netip.Addr) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bySrc[src])
}

// FlowStats is what the egress proxy holds now, and what it refused.
type FlowStats struct {
	Open    int
	Refused map[string]uint64 // by reason: RefusedSandbox, RefusedNode
}

func (f *flows) stats() FlowStats {
	f.mu.Lock()
	open := f.total
	f.mu.Unlock()
	return FlowStats{Open: open, Refused: map[string]uint64{RefusedSandbox: f.refused[0].Load(), RefusedNode: f.refused[1].Load()}}
}

func (f *flows) close() {
	close(f.stop)
	<-f.done
}

func (f *flows) reaper() {
	defer close(f.done)
	tick := time.NewTicker(min(max(f.limits.HalfClosed/4, 10*time.Millisecond), 10*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.reap()
		}
	}
}

// reap closes the flows idle past their limit.
func (f *flows) reap() {
	var all []*flow
	f.mu.Lock()
	for _, mine := range f.bySrc {
		for fl := range mine {
			all = append(all, fl)
		}
	}
	f.mu.Unlock()
	for _, fl := range all {
		limit := f.limits.Idle
		if fl.halfClosed.Load() {
			limit = f.limits.HalfClosed
		}
		if idle, ok := fl.idle(); ok && idle >= limit {
			fl.close()
		}
	}
}

// idle is how long since any of the flow's TCP connections sent or
// received data, as their kernel counts it (TCP_INFO); false when none
// tells.
func (fl *flow) idle() (time.Duration, bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	least, known := time.Duration(0), false
	for c := range fl.conns {
		if d, ok := tcpIdle(c); ok && (!known || d < least) {
			least, known = d, true
		}
	}
	return least, known
}

// tcpIdle is how long a TCP connection has moved no data either way.
func tcpIdle(c net.Conn) (time.Duration, bool) {
	if w, ok := c.(*closeDetach); ok {
		c = w.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || ierr != nil {
		return 0, false
	}
	return time.Duration(min(info.Last_data_recv, info.Last_data_sent)) * time.Millisecond, true
}

// attach makes c one of the flow's connections, closed with it; a flow
// already closed closes c.
func (fl *flow) attach(c net.Conn) error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.closed {
		c.Close()
		return net.ErrClosed
	}
	fl.conns[c] = struct{}{}
	return nil
}

// attachClosing is attach for a connection that may close before its
// flow (an HTTP transport's, upstream): closing it forgets it.
func (fl *flow) attachClosing(c net.Conn) (net.Conn, error) {
	w := &closeDetach{Conn: c, fl: fl}
	if err := fl.attach(w); err != nil {
		return nil, err
	}
	return w, nil
}

func (fl *flow) detach(c net.Conn) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	delete(fl.conns, c)
}

// close closes the flow's connections, outside its lock: closing one of
// attachClosing's detaches it, which takes the lock.
func (fl *flow) close() {
	fl.mu.Lock()
	fl.closed = true
	conns := fl.conns
	fl.conns = map[net.Conn]struct{}{}
	fl.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// closeDetach is a flow's connection that leaves it when closed.
type closeDetach struct {
	net.Conn
	fl *flow
}

func (c *closeDetach) Close() error {
	c.fl.detach(c)
	return c.Conn.Close()
}

// pipe copies both ways between the sandbox's connection and the one
// dialled for it (TCP to TCP: the kernel's splice). When one direction
// ends, the other's sending half is closed and the flow counts as half
// closed: it ends at its next idle period of FlowLimits.HalfClosed. Either
// side failing closes both.
func (fl *flow) pipe(sandbox, up net.Conn) {
	done := make(chan error, 2)
	one := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		closeWrite(dst)
		done <- err
	}
	go one(up, sandbox)
	go one(sandbox, up)
	if err := <-done; err != nil {
		fl.close()
	}
	fl.halfClosed.Store(true)
	<-done
}
