package addrpolicy

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// hostMaxAge is how long the host's interfaces' addresses, once read, are
// taken for current: an address added since is refused by the kernel's
// own answer where there is one (isLocal), and by the next read anyway.
const hostMaxAge = 5 * time.Second

// hostAddrs are the host's own addresses: every interface's, read at the
// start and again when older than hostMaxAge.
type hostAddrs struct {
	mu    sync.Mutex
	read  time.Time
	addrs map[netip.Addr]bool
}

func newHostAddrs() *hostAddrs {
	h := &hostAddrs{}
	h.refresh()
	return h
}

func (h *hostAddrs) refresh() {
	addrs := map[netip.Addr]bool{}
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range ifs {
			if n, ok := ia.(*net.IPNet); ok {
				if a, ok := netip.AddrFromSlice(n.IP); ok {
					addrs[a.Unmap()] = true
				}
			}
		}
	}
	h.addrs, h.read = addrs, time.Now()
}

// has reports whether a is one of the host's own addresses.
func (h *hostAddrs) has(a netip.Addr) bool {
	h.mu.Lock()
	if time.Since(h.read) > hostMaxAge {
		h.refresh()
	}
	own := h.addrs[a]
	h.mu.Unlock()
	return own || isLocal(a)
}
