package addrpolicy

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/covesandbox/cove/internal/logx"
)

// Nodes keeps the addresses of a cluster's nodes, from the URLs they
// registered (a name resolved at each refresh), for Config.Nodes.
type Nodes struct {
	addrs atomic.Pointer[[]netip.Addr]
}

// Addrs are the nodes' addresses as last refreshed.
func (n *Nodes) Addrs() []netip.Addr {
	if p := n.addrs.Load(); p != nil {
		return *p
	}
	return nil
}

// Set takes the nodes' URLs (or host:port, or bare hosts) and keeps their
// addresses; a name that does not resolve is left out.
func (n *Nodes) Set(ctx context.Context, urls []string) {
	var out []netip.Addr
	for _, u := range urls {
		host := u
		if parsed, err := url.Parse(u); err == nil && parsed.Host != "" {
			host = parsed.Hostname()
		} else if h, _, err := net.SplitHostPort(u); err == nil {
			host = h
		}
		if a, err := netip.ParseAddr(host); err == nil {
			out = append(out, a.Unmap())
			continue
		}
		look, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, _ := net.DefaultResolver.LookupNetIP(look, "ip", host)
		cancel()
		for _, a := range addrs {
			out = append(out, a.Unmap())
		}
	}
	n.addrs.Store(&out)
}

// Watch refreshes the nodes' addresses from list now and every every
// until ctx ends.
func (n *Nodes) Watch(ctx context.Context, every time.Duration, list func(context.Context) ([]string, error), log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if urls, err := list(ctx); err != nil {
			if ctx.Err() == nil {
				log.Warn("read the nodes' addresses", logx.Err(err))
			}
		} else {
			n.Set(ctx, urls)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
