package namespaces

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// What a microVM's guest (package microvm/guest) shares with this
// driver's sandboxes: the same /dev and /proc, and the same locked-down
// root for the agent and every process it starts. Inside its own kernel a
// guest's code could do more; it is given no more than a container's.

// MountSandboxDev makes the minimal /dev of a sandbox under root.
func MountSandboxDev(root string, shmBytes int64) error { return mountDev(root, shmBytes, false) }

// MountSandboxProc mounts a sandbox's /proc under root (no lxcfs: a
// guest's kernel tells its own memory and CPUs).
func MountSandboxProc(root string) error { return mountProc(root, "") }

// ServeLockedDown runs the agent in this process, as a sandbox's init
// does: capabilities down to a sandbox root's (bounding set included), the
// seccomp filter with no_new_privs on every thread, and every process the
// agent starts forked by this (locked) thread, so that each inherits them.
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
	runAgentHere(fixed, a, 0, oom)
	return 1
}

func lockDown() error {
	if !allThreadsSupported {
		return errors.New("a build with cgo cannot set every thread's capabilities: build cove-sandbox with CGO_ENABLED=0")
	}
	if err := clearSecurebits(allThreads); err != nil {
		return err
	}
	if err := dropCaps(); err != nil {
		return err
	}
	if err := capset(allThreads); err != nil {
		return err
	}
	if err := loadSeccomp(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}
