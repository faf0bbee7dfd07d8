package network

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/fdbudget"
)

// FlowLimits bound what sandboxes hold in the egress proxy: each proxied
// connection costs the node two sockets (the sandbox's and the one it
// dials; a transformed connection's upstreams one each) and the buffers
// that copy between them, charged to no sandbox's cgroup, so they are
// counted here instead, and every socket takes its descriptor from the
// process's shared budget (Config.Descriptors).
type FlowLimits struct {
	// PerSandbox is how many connections one sandbox may hold in the
	// proxy at once; more are refused (reset). Default 256.
	PerSandbox int
	// PerTeam is how many the sandboxes of one team may hold together,
	// so that another team still connects while one holds its share.
	// Default half of Node.
	PerTeam int
	// Node is how many the proxy holds for all sandboxes together.
	// Default: half of the shared descriptors (the budget's, else those
	// of the process's limit less fdbudget's reserve) at two a
	// connection, between 64 and 16384.
	Node int
	// Idle closes a connection that moved no byte either way for so
	// long. Default 5 minutes (a cloud NAT's idle timeout is of that
	// order); once one direction has ended, the other gets HalfClosed.
	Idle time.Duration
	// HalfClosed is how long a connection whose one direction ended may
	// stay idle in the other before both are closed. Default 30 s.
	HalfClosed time.Duration
}

// flowDescriptors is what a copied connection holds: the sandbox's socket
// and the one dialled for it (the copies use no splice pipes: copyFlow).
const flowDescriptors = 2

func (l FlowLimits) withDefaults(fds *fdbudget.Budget) FlowLimits {
	if l.PerSandbox <= 0 {
		l.PerSandbox = 256
	}
	if l.Node <= 0 {
		l.Node = defaultNodeFlows(fds)
	}
	if l.PerTeam <= 0 {
		l.PerTeam = max(l.Node/2, 1)
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

// defaultNodeFlows: half of the shared descriptors, two a connection,
// between 64 and 16384; the other half stays for the node's other shared
// pools.
func defaultNodeFlows(fds *fdbudget.Budget) int {
	shared := fds.Shared()
	if fds == nil {
		var r unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
			return 1024
		}
		limit := int(min(r.Cur, 1<<30))
		shared = limit - fdbudget.DefaultReserve(limit)
	}
	return min(max(shared/2/flowDescriptors, 64), 16384)
}

// Refusal reasons, as the metrics name them.
const (
	RefusedSandbox     = "sandbox"     // the sandbox holds FlowLimits.PerSandbox
	RefusedTeam        = "team"        // its team holds FlowLimits.PerTeam
	RefusedNode        = "node"        // the node holds FlowLimits.Node
	RefusedDescriptors = "descriptors" // the shared descriptors reach the reserve
)

var refusals = [...]string{RefusedSandbox, RefusedTeam, RefusedNode, RefusedDescriptors}

// errFlowLimit is a connection refused for a limit.
var errFlowLimit = errors.New("egress connection limit")

// flows counts and owns the proxy's connections by sandbox address and
// team: it refuses those past the limits, charges each socket to the
// descriptor budget until it is closed, closes those idle for too long (a
// reaper that wakes a few times per idle period and asks the kernel when
// each socket last sent or received data), and closes all of a sandbox's
// at once when it is released or paused.
type flows struct {
	limits FlowLimits
	fds    *fdbudget.Budget // nil: descriptors are not counted

	mu     sync.Mutex
	total  int
	bySrc  map[netip.Addr]map[*flow]struct{}
	byTeam map[string]int

	held    atomic.Int64 // descriptors the flows hold
	refused [len(refusals)]atomic.Uint64
	stop    chan struct{}
	done    chan struct{}
}

func newFlows(l FlowLimits, fds *fdbudget.Budget) *flows {
	f := &flows{limits: l.withDefaults(fds), fds: fds, bySrc: map[netip.Addr]map[*flow]struct{}{}, byTeam: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go f.reaper()
	return f
}

// flow is one proxied connection: the sandbox's end and every connection
// opened upstream for it, each holding a descriptor of the budget.
type flow struct {
	owner      *flows
	team       string
	halfClosed atomic.Bool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// refuse counts a refusal for reason (an index of refusals).
func (f *flows) refuse(reason int) error {
	f.refused[reason].Add(1)
	return fmt.Errorf("%w: %s", errFlowLimit, refusals[reason])
}

// open counts a new connection c from src, a sandbox of team, and its
// descriptor, or refuses it (errFlowLimit).
func (f *flows) open(src netip.Addr, team string, c net.Conn) (*flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mine := f.bySrc[src]
	switch {
	case len(mine) >= f.limits.PerSandbox:
		return nil, f.refuse(0)
	case f.byTeam[team] >= f.limits.PerTeam:
		return nil, f.refuse(1)
	case f.total >= f.limits.Node:
		return nil, f.refuse(2)
	case !f.fds.Take(1):
		return nil, f.refuse(3)
	}
	if mine == nil {
		mine = map[*flow]struct{}{}
		f.bySrc[src] = mine
	}
	f.held.Add(1)
	fl := &flow{owner: f, team: team, conns: map[net.Conn]struct{}{c: {}}}
	mine[fl] = struct{}{}
	f.byTeam[team]++
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
			if f.byTeam[fl.team]--; f.byTeam[fl.team] == 0 {
				delete(f.byTeam, fl.team)
			}
		}
		if len(mine) == 0 {
			delete(f.bySrc, src)
		}
	}
}

// closeAll closes every connection src holds (its sandbox was released or
// paused), which gives their descriptors back at once; the handlers that
// served them stop counting them as they end.
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
	Open int
	// Descriptors are the sockets its connections hold (each taken from
	// the process's descriptor budget).
	Descriptors int
	Refused     map[string]uint64 // by reason: RefusedSandbox, RefusedTeam, …
}

func (f *flows) stats() FlowStats {
	f.mu.Lock()
	open := f.total
	f.mu.Unlock()
	st := FlowStats{Open: open, Descriptors: int(f.held.Load()), Refused: map[string]uint64{}}
	for i, r := range refusals {
		st.Refused[r] = f.refused[i].Load()
	}
	return st
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

// take counts n more descriptors of the flows, or refuses (false) when
// the budget would reach into its reserve.
func (f *flows) take(n int) bool {
	if !f.fds.Take(n) {
		return false
	}
	f.held.Add(int64(n))
	return true
}

// give returns n descriptors the flows no longer hold.
func (f *flows) give(n int) {
	f.held.Add(-int64(n))
	f.fds.Give(n)
}

// attach makes c one of the flow's connections, its descriptor counted
// until it leaves the flow, closed with it; a flow already closed, or a
// descriptor the budget refuses, closes c.
func (fl *flow) attach(c net.Conn) error {
	var err error
	fl.mu.Lock()
	switch {
	case fl.closed:
		err = net.ErrClosed
	case !fl.owner.take(1):
		err = fl.owner.refuse(3)
	default:
		fl.conns[c] = struct{}{}
	}
	fl.mu.Unlock()
	if err != nil {
		c.Close() // outside the lock: one of attachClosing's detaches
	}
	return err
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

// detach forgets c, closed, and gives its descriptor back.
func (fl *flow) detach(c net.Conn) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if _, ok := fl.conns[c]; ok {
		delete(fl.conns, c)
		fl.owner.give(1)
	}
}

// close closes the flow's connections, outside its lock (closing one of
// attachClosing's detaches it, which takes the lock), and gives their
// descriptors back: no pipe or buffer of the copies keeps one.
func (fl *flow) close() {
	fl.mu.Lock()
	fl.closed = true
	conns := fl.conns
	fl.conns = map[net.Conn]struct{}{}
	fl.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	fl.owner.give(len(conns))
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
// dialled for it (copyFlow). When one direction ends, the other's sending
// half is closed and the flow counts as half closed: it ends at its next
// idle period of FlowLimits.HalfClosed. Either side failing closes both.
func (fl *flow) pipe(sandbox, up net.Conn) {
	done := make(chan error, 2)
	one := func(dst, src net.Conn) {
		err := copyFlow(dst, src)
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

// copyBufSize is the size of the copies' buffers.
const copyBufSize = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyFlow copies src to dst until src ends. It makes no splice pipe: Go's
// splice of TCP to TCP holds two pipe descriptors a direction for the
// whole copy, idle or not, and its pool keeps them for minutes after (six
// descriptors a connection, not two). From a TCP socket it reads only
// once the kernel has data (a read that would block gives the buffer
// back before it waits): an idle connection holds no buffer, a busy one
// at most one a direction. From a tunnel's connection it copies as io.Copy
// would, through a 32 KiB buffer for the whole copy.
func copyFlow(dst, src net.Conn) error {
	tc, ok := src.(*net.TCPConn)
	if !ok { // a tunnel's connection (SOCKS5, TLS): a buffer for the whole copy, as io.Copy's
		_, err := io.CopyBuffer(writerOnly{dst}, readerOnly{src}, make([]byte, 32<<10))
		return err
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	for {
		var (
			bp   *[]byte
			n    int
			rerr error
		)
		err := rc.Read(func(fd uintptr) bool {
			bp = copyBufs.Get().(*[]byte)
			for {
				n, rerr = unix.Read(int(fd), *bp)
				if rerr != unix.EINTR {
					break
				}
			}
			if rerr == unix.EAGAIN {
				copyBufs.Put(bp)
				bp = nil
				return false // wait until the socket has data
			}
			return true
		})
		if err == nil {
			err = rerr
		}
		if err == nil && n > 0 {
			_, err = dst.Write((*bp)[:n])
		}
		if bp != nil {
			copyBufs.Put(bp)
		}
		switch {
		case err != nil:
			return err
		case n == 0:
			return nil // the far end ended its side
		}
	}
}

// writerOnly hides a connection's ReadFrom (a splice from a TCP source),
// readerOnly its WriteTo.
type (
	writerOnly struct{ io.Writer }
	readerOnly struct{ io.Reader }
)
