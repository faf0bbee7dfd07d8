package namespaces

import (
	"context"
	"fmt"
	"net"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
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
	if sb.end.Ended() {
		return nil, errs.New(errs.Unavailable, "sandbox %s has ended", id)
	}
	sb.nsMu.RLock()
	if sb.netns == nil {
		sb.nsMu.RUnlock()
		return nil, errs.New(errs.Unavailable, "sandbox %s has ended", id)
	}
	c, err := hostproc.Dial(ctx, sb.netns, d.host, port)
	sb.nsMu.RUnlock()
	if err != nil {
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("dial sandbox %s port %d: %w", id, port, err))
	}
	return c, nil
}
