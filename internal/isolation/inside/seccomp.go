package inside

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// DeniedSyscalls answer EPERM: a sandbox never needs them, and each is a
// way to reach the host kernel's sharper edges (the
// mount family, pivot_root, kexec, modules, bpf, perf, keyrings,
// userfaultfd, handles, reboot, swap, clocks, namespaces).
var DeniedSyscalls = []string{
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr", "chroot",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
	"open_by_handle_at", "name_to_handle_at", "reboot", "swapon", "swapoff",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"setns", "acct", "quotactl", "syslog", "vhangup", "iopl", "ioperm",
	"lookup_dcookie", "uselib", "kcmp", "process_vm_writev",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
}

// sandboxPolicy builds the filter: default allow, EPERM for DeniedSyscalls,
// EPERM for unshare and clone asking for a new user namespace, ENOSYS for
// clone3 (whose flags a filter cannot inspect; libc falls back to clone).
func sandboxPolicy() seccomp.Policy {
	newUser := []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: DeniedSyscalls},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "unshare", Conditions: newUser},
				{Name: "clone", Conditions: newUser},
			}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// LoadSeccomp sets no_new_privs and installs the filter on every thread of
// the process (TSYNC also sets no_new_privs on each).
//
// The library's program lets a system call of another architecture (the
// i386 ABI through `int 0x80`, which a 64-bit process may use) through to
// its default action, allow: every denied call would be one instruction
// away. A guard in front answers ENOSYS to every call that is not of this
// process's own architecture; 32-bit programs do not run in a sandbox.
func LoadSeccomp() error {
	native, err := arch.GetInfo("")
	if err != nil {
		return err
	}
	p := sandboxPolicy()
	policy, err := p.Assemble()
	if err != nil {
		return fmt.Errorf("assemble policy: %w", err)
	}
	const archOffset = 4 // struct seccomp_data: int nr; __u32 arch; …
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	}
	raw, err := bpf.Assemble(append(guard, policy...))
	if err != nil {
		return fmt.Errorf("assemble filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// With TSYNC the call returns the id of a thread it could not
	// synchronize, or an errno.
	r, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("load filter: %w", e)
	}
	if r != 0 {
		return fmt.Errorf("load filter: thread %d could not take it", r)
	}
	return nil
}
