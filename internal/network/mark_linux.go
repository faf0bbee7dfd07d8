package network

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

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
