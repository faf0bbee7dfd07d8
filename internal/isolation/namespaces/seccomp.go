package namespaces

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls answer EPERM: a sandbox never needs them, and each is a
// way to reach the host kernel's sharper edges (e2b-wire issue list: the
// mount family, pivot_root, kexec, modules, bpf, perf, keyrings,
// userfaultfd, handles, reboot, swap, clocks, namespaces).
var deniedSyscalls = []string{
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

// sandboxPolicy builds the filter: default allow, EPERM for deniedSyscalls,
// EPERM for unshare and clone asking for a new user namespace, ENOSYS for
// clone3 (whose flags a filter cannot inspect; libc falls back to clone).
func sandboxPolicy() seccomp.Policy {
	newUser := []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: deniedSyscalls},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "unshare", Conditions: newUser},
				{Name: "clone", Conditions: newUser},
			}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
}

// loadSeccomp sets no_new_privs and installs the filter on every thread of
// the process (TSYNC also sets no_new_privs on each).
func loadSeccomp() error {
	return seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: sandboxPolicy()})
}
