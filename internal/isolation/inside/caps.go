package inside

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

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

// capMask is keptCaps as the two 32-bit words Capset takes.
func capMask() [2]uint32 {
	var mask [2]uint32
	for _, c := range keptCaps {
		mask[c/32] |= 1 << (c % 32)
	}
	return mask
}

// DropCaps shrinks the calling thread's bounding set to keptCaps and sets
// its effective, permitted and inheritable sets to them, with no ambient
// capabilities. What this thread forks or execs keeps exactly these.
func DropCaps() error {
	keep := map[uintptr]bool{}
	for _, c := range keptCaps {
		keep[c] = true
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
	return Capset(ThisThread)
}

// Capset sets effective, permitted and inheritable to keptCaps on the
// threads sys reaches.
func Capset(sys ThreadSyscall) error {
	mask := capMask()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: mask[0], Permitted: mask[0], Inheritable: mask[0]},
		{Effective: mask[1], Permitted: mask[1], Inheritable: mask[1]},
	}
	err := sys(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	if err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	return nil
}

// ThreadSyscall runs a raw syscall on some threads of the process.
type ThreadSyscall func(trap, a1, a2, a3 uintptr) error

// AllThreads runs it on every thread (a stop-the-world each: use sparingly).
func AllThreads(trap, a1, a2, a3 uintptr) error {
	if _, _, e := syscall.AllThreadsSyscall(trap, a1, a2, a3); e != 0 {
		return e
	}
	return nil
}

// ThisThread runs it on the calling (locked) thread.
func ThisThread(trap, a1, a2, a3 uintptr) error {
	if _, _, e := syscall.RawSyscall(trap, a1, a2, a3); e != 0 {
		return e
	}
	return nil
}
