package namespaces

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
)

// Dial implements isolation.Driver: it connects to 127.0.0.1:port inside
// the sandbox's network namespace. The socket is created on a thread that
// has entered the namespace and stays bound to it; the thread then returns
// to the node's namespace. No veth or route is needed.
func (d *Driver) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	sb := d.get(id)
	if sb == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	select {
	case <-sb.done:
		return nil, errs.New(errs.Unavailable, "sandbox %s has ended", id)
	default:
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(sb.netns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("enter sandbox %s network: %w", id, err)}
			return
		}
		var dialer net.Dialer
		c, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if serr := unix.Setns(int(d.host.Fd()), unix.CLONE_NEWNET); serr == nil {
			runtime.UnlockOSThread()
		} // else: the thread stays locked and dies with this goroutine
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("dial sandbox %s port %d: %w", id, port, r.err))
	}
	return r.c, nil
}
