package inside

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ServeLockedDown runs the agent in this process, as the namespaces
// driver's sandbox init does (a microVM's guest init starts it so: inside
// its own kernel a guest's code could do more, and it is given no more
// than a container's): capabilities down to a sandbox root's (bounding
// set included), the seccomp filter with no_new_privs on every thread,
// and every process the agent starts forked by this (locked) thread, so
// that each inherits them.
// Its settings are in the environment (EnvSandboxEnv, EnvAgentSettings),
// and oom, when > 0, is the OOM counter of the sandbox's cgroup. It
// returns only on failure.
func ServeLockedDown(oom int) int {
	runtime.LockOSThread()
	fixed, a, err := agentEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cove agent: %v\n", err)
		return 1
	}
	if err := lockDown(); err != nil {
		fmt.Fprintf(os.Stderr, "cove agent: lock down: %v\n", err)
		return 1
	}
	RunAgentHere(fixed, a, 0, oom)
	return 1
}

func lockDown() error {
	if !AllThreadsSupported {
		return errors.New("a build with cgo cannot set every thread's capabilities: build cove-sandbox with CGO_ENABLED=0")
	}
	if err := ClearSecurebits(AllThreads); err != nil {
		return err
	}
	if err := DropCaps(); err != nil {
		return err
	}
	if err := Capset(AllThreads); err != nil {
		return err
	}
	if err := LoadSeccomp(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// ClearSecurebits makes sure the init's securebits are 0: with
// SECBIT_NO_SETUID_FIXUP, say, the agent's processes would keep
// capabilities across a change to an unprivileged user. The kernel resets
// them for a process born in a new user namespace, nothing sets them
// between exec and here, and every thread is cloned from the one that
// exec'd: this thread's bits are every thread's, and only bits a starter
// left set cost the clearing on the threads sys reaches.
func ClearSecurebits(sys ThreadSyscall) error {
	bits, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0)
	if e != 0 {
		return fmt.Errorf("read securebits: %w", e)
	}
	if bits == 0 {
		return nil
	}
	if err := sys(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, 0, 0); err != nil {
		return fmt.Errorf("clear securebits: %w", err)
	}
	if bits, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_GET_SECUREBITS, 0, 0); e != 0 || bits != 0 {
		return fmt.Errorf("securebits still %#x (%v)", bits, e)
	}
	return nil
}
