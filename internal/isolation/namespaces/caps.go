package namespaces

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// keptCaps is the sandbox's root: enough to run the agent (switch users,
// own files, signal its processes) and ordinary root work, nothing that
// reaches the kernel or the network stack's raw side.
var keptCaps = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID,
	unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_AUDIT_WRITE,
}

// dropCaps shrinks the bounding set to keptCaps and sets the calling
// thread's effective, permitted and inheritable sets to it, with no
// ambient capabilities. The exec that follows keeps exactly these.
func dropCaps() error {
	keep := map[uintptr]bool{}
	var mask [2]uint32
	for _, c := range keptCaps {
		keep[c] = true
		mask[c/32] |= 1 << (c % 32)
	}
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if keep[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: mask[0], Permitted: mask[0], Inheritable: mask[0]},
		{Effective: mask[1], Permitted: mask[1], Inheritable: mask[1]},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	return nil
}
