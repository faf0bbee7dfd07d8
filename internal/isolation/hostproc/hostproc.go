// Package hostproc holds what isolation drivers share about a sandbox on
// the host: its processes — named for good (pid and start time), signalled
// and waited for without hitting a reused pid, a network namespace to run
// code in — its end, its record and directory, and its group's usage.
package hostproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vishvananda/netns"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

// StartTime returns a live process's start time (clock ticks after boot),
// which together with the pid names one process for good. A zombie is not
// live.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// Alive reports whether the handle's pid is still the process that
// started at its start time.
func Alive(h isolation.Handle) bool {
	got, err := StartTime(h.PID)
	return err == nil && got == h.StartTime
}

// Kill SIGKILLs the handle's process if it is still the same process.
func Kill(h isolation.Handle) error {
	if h.PID <= 1 || !Alive(h) {
		return nil
	}
	fd, err := unix.PidfdOpen(h.PID, 0)
	if err != nil {
		return nil // already gone
	}
	defer unix.Close(fd)
	if !Alive(h) { // the pidfd now pins the process
		return nil
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

// WaitGone waits until a process that is not our child has exited.
func WaitGone(ctx context.Context, h isolation.Handle) error {
	for Alive(h) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// WaitPidfd blocks until the process of pidfd has exited.
func WaitPidfd(pidfd int) {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == nil || !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// WaitPidfdContext is WaitPidfd that gives up when ctx ends (it looks
// every 100 ms).
func WaitPidfdContext(ctx context.Context, pidfd int) error {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 100)
		if n > 0 {
			return nil
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// InNetNS runs fn on a thread inside the network namespace ns: sockets it
// makes and processes it forks belong there. The thread then returns to
// host (the caller's own namespace); if it cannot, it stays locked and dies
// with its goroutine. Open host from /proc/thread-self/ns/net on a thread
// that is not locked (those are always in the node's namespace), never
// from /proc/self: that names the main thread, which may be inside a
// sandbox's namespace at that moment, and a thread returned there would
// take the node's next netlink or nftables call with it.
func InNetNS(ns, host *os.File, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the sandbox network: %w", err)
			return
		}
		err := fn()
		if unix.Setns(int(host.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Record is what a driver keeps of a sandbox in its directory, so a
// restarted node can adopt it or remove what it left.
type Record struct {
	Handle isolation.Handle `json:"handle"`
	Cgroup string           `json:"cgroup"`
	Limits isolation.Limits `json:"limits"`
	// UserNSBase is the first host id of the sandbox's user namespace
	// (0: none), held until the sandbox is destroyed.
	UserNSBase uint32 `json:"userNSBase,omitempty"`
}

// recordFile is a sandbox's Record inside its directory.
const recordFile = "state.json"

// WriteRecord saves r in the sandbox directory dir.
func WriteRecord(dir string, r Record) error {
	return fsutil.WriteJSON(filepath.Join(dir, recordFile), r)
}

// ReadRecord reads the Record in the sandbox directory dir.
func ReadRecord(dir string) (Record, error) {
	var r Record
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// Dial connects to 127.0.0.1:port in the network namespace ns, from a
// thread that returns to host afterwards.
func Dial(ctx context.Context, ns, host *os.File, port int) (net.Conn, error) {
	return DialAddr(ctx, ns, host, "127.0.0.1", port)
}

// DialAddr connects to addr:port in the network namespace ns, as Dial.
func DialAddr(ctx context.Context, ns, host *os.File, addr string, port int) (net.Conn, error) {
	var c net.Conn
	err := InNetNS(ns, host, func() error {
		var dialer net.Dialer
		var err error
		c, err = dialer.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		return err
	})
	return c, err
}

// NewNetNS creates a network namespace without entering it for long: a
// locked thread unshares, keeps a handle and returns to its original
// namespace. If it cannot return, the thread stays locked and dies with its
// goroutine.
func NewNetNS() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, err}
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("new network namespace: %w", err)}
			return
		}
		if err := netns.Set(orig); err != nil {
			ns.Close()
			ch <- result{-1, fmt.Errorf("return to the original network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{ns, nil}
	}()
	r := <-ch
	return r.ns, r.err
}

// End is a sandbox's end, once it has come: the driver's watcher sets it
// when the sandbox's process has exited; Wait, Dial and Destroy read it.
type End struct {
	done chan struct{}
	exit isolation.Exit
}

// NewEnd returns an end still to come.
func NewEnd() *End { return &End{done: make(chan struct{})} }

// Set records how the sandbox ended and wakes its waiters; call it once.
func (e *End) Set(exit isolation.Exit) {
	e.exit = exit
	close(e.done)
}

// Done is closed once the sandbox has ended.
func (e *End) Done() <-chan struct{} { return e.done }

// Ended reports whether the sandbox has ended.
func (e *End) Ended() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// Exit is how the sandbox ended; the zero Exit until it has.
func (e *End) Exit() isolation.Exit {
	if !e.Ended() {
		return isolation.Exit{}
	}
	return e.exit
}

// Wait returns how the sandbox ended, once it has, or ctx's error.
func (e *End) Wait(ctx context.Context) (isolation.Exit, error) {
	select {
	case <-e.done:
		return e.exit, nil
	case <-ctx.Done():
		return isolation.Exit{}, ctx.Err()
	}
}

// SandboxIDs lists the sandboxes that have a directory under dir, a
// driver's own (isolation.Lister).
func SandboxIDs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && isolation.ValidateID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Stats reads a sandbox's usage (isolation.Stater) from its group cg, with
// its limits, and the disk use of the file system at disk (its writable
// layer).
func Stats(cg *cgroups.Group, limits isolation.Limits, disk string) (isolation.Stats, error) {
	s, err := cg.Stats()
	if err != nil {
		return isolation.Stats{}, err
	}
	out := isolation.Stats{
		CPUUsage: s.CPUUsage, CPUMillis: limits.CPUMillis,
		MemoryUsage: s.MemoryUsage, MemoryLimit: s.MemoryLimit, MemoryCache: s.MemoryCache,
		PIDs: s.PIDs, OOMKills: s.OOMKills, DiskTotal: uint64(limits.WritableBytes()),
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(disk, &fs); err == nil {
		out.DiskUsed = (fs.Blocks - fs.Bfree) * uint64(fs.Bsize)
	}
	return out, nil
}

// LogTail returns the last limit bytes of the log file at path, from the
// start of a line; a missing file is NotFound.
func LogTail(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.New(errs.NotFound, "no log at %s", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-limit, 0)
	b := make([]byte, st.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && n < len(b) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	b = b[:n]
	if off > 0 { // the first line is cut: drop it
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		} else {
			b = nil
		}
	}
	return b, nil
}

// SetLimits gives a paused sandbox's group next's CPU quota and memory
// limit in place of cur's (a resize). Memory the kernel cannot reclaim
// down to (EBUSY) is refused as an InvalidArgument; on any failure the
// group is given cur's again (an error doing that is logged).
func SetLimits(log *slog.Logger, cg *cgroups.Group, id string, cur, next isolation.Limits) error {
	err := cg.Update(cgroups.Limits{CPUMillis: next.CPUMillis, MemoryBytes: next.MemoryMB << 20})
	if err == nil {
		return nil
	}
	if perr := cg.Update(cgroups.Limits{CPUMillis: cur.CPUMillis, MemoryBytes: cur.MemoryMB << 20}); perr != nil {
		log.Error("put back a sandbox's limits", logx.SandboxID(id), logx.Err(perr))
	}
	if errors.Is(err, unix.EBUSY) {
		used := ""
		if s, serr := cg.Stats(); serr == nil {
			used = fmt.Sprintf(" (it holds %d MiB)", s.MemoryUsage>>20)
		}
		return errs.New(errs.InvalidArgument, "memoryMB %d: sandbox %s holds more memory than that%s", next.MemoryMB, id, used)
	}
	return err
}
