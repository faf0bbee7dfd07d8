package network

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// TenantMark is the firewall mark of the sockets the server opens on a
// tenant's behalf, to addresses a tenant chose (webhooks, image
// registries): every node's firewall refuses such packets to its
// sandboxes, so no address check that missed a sandbox range lets one
// team's request reach another team's sandbox.
const TenantMark = 0x636f7665 // "cove"

// MarkTenant is a net.Dialer's Control that gives the socket TenantMark.
// Without CAP_NET_ADMIN (an API replica that runs no sandboxes) the mark
// is not set: no firewall of a node on its host is there to read it.
func MarkTenant(_, _ string, rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, TenantMark)
	}); err != nil {
		return err
	}
	if errors.Is(serr, unix.EPERM) {
		return nil
	}
	return serr
}
