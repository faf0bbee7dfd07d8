package addrpolicy

import (
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// isLocal reports whether the kernel delivers packets to a on this host
// (a route of type local: an interface's address, added just now too, or
// a range routed to the host itself).
func isLocal(a netip.Addr) bool {
	routes, err := netlink.RouteGet(a.AsSlice())
	if err != nil {
		return false
	}
	for _, r := range routes {
		if r.Type == unix.RTN_LOCAL {
			return true
		}
	}
	return false
}
