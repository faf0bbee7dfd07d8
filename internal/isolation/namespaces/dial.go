package namespaces

import (
	"context"
	"fmt"
	"net"
	"os"
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
	var c net.Conn
	err := d.inNetNS(sb.netns, func() error {
		var dialer net.Dialer
		var err error
		c, err = dialer.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("dial sandbox %s port %d: %w", id, port, err))
	}
	return c, nil
}

// inNetNS runs fn on a thread inside the network namespace ns: sockets it
// makes and processes it forks belong there. The thread then returns to the
// node's namespace; if it cannot, it stays locked and dies with its
// goroutine.
func (d *Driver) inNetNS(ns *os.File, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the sandbox network: %w", err)
			return
		}
		err := fn()
		if unix.Setns(int(d.host.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
