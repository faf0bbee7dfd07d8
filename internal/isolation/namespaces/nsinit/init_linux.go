package nsinit

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation/inside"
)

// Role is what this process was started as, of the driver's own roles, by
// the name it was started under: a sandbox's init (which becomes its
// agent), the node's spawner of inits, or the agent an init execs (or
// runsc starts); as the function that runs it, nil for none. A binary
// that is the driver's sandbox binary (cove, cove-sandbox, and the test
// binaries that start the driver) runs it first thing in main, on the
// process's main thread (locked to it from an init): every namespace
// change stays on the thread that execs.
func Role() func() int {
	switch {
	case os.Args[0] == InitArg0:
		return initMain
	case os.Args[0] == SpawnerArg0:
		return spawnerMain
	case inside.IsAgent():
		return inside.AgentMain
	}
	return nil
}

// initMain is a sandbox's init: it becomes the agent, and returns only
// when it fails.
func initMain() int {
	err := sandboxInit()
	prefix := "cove sandbox init: "
	if errs.Is(err, errs.InvalidArgument) { // the spec's or template's fault
		prefix = InitRefused
	}
	fmt.Fprintf(os.Stderr, "%s%v\n", prefix, err)
	return 1
}

// sandboxInit runs as the sandbox's PID 1 in its new pid, mount, uts, ipc
// and net namespaces: it waits for its config (sent once the driver put it
// in its cgroup), builds the root file system, locks itself down and
// becomes the agent.
//
// Capabilities, the bounding set and the cgroup namespace belong to a
// thread. This (main, locked) thread gets all of them and forks every
// process the agent starts, so each inherits them; the process's other
// threads get the capability sets in one all-threads call, and the seccomp
// filter with no_new_privs through TSYNC. That saves a second Go start-up
// (an exec of the agent). Binaries linked with cgo cannot make all-threads
// calls: they exec the agent from this thread instead.
func sandboxInit() error {
	runtime.LockOSThread()
	inPlace := inside.AllThreadsSupported
	sys := inside.ThisThread // a cgo build execs the agent from this thread
	if inPlace {
		sys = inside.AllThreads
	}
	if err := inside.ClearSecurebits(sys); err != nil {
		return err
	}
	var cfg Config
	mounts, err := receiveMounts(FDConfig)
	if err != nil {
		return err
	}
	f := os.NewFile(FDConfig, "config")
	if err := json.NewDecoder(f).Decode(&cfg); err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	f.Close()
	if cfg.UserNS {
		if len(mounts) != len(cfg.Layers)+len(cfg.Binds) {
			return fmt.Errorf("%d mounts came for %d layers and %d binds", len(mounts), len(cfg.Layers), len(cfg.Binds))
		}
		cfg.layerFDs, cfg.bindFDs = mounts[:len(cfg.Layers)], mounts[len(cfg.Layers):]
	}
	// Only now, inside the sandbox's cgroup, so that the cgroup namespace's
	// root is the sandbox's own group.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	// A time namespace for the processes this thread forks, not for the
	// init itself: the node sets its clocks (uptime) to count from the
	// create, or from a warm sandbox's hand-over, while no process is in
	// it yet. A kernel without time namespaces leaves uptime to lxcfs, and
	// so does a cgo build: its exec of the agent would enter the namespace
	// before the node could set it.
	cfg.ownClock = inPlace && unix.Unshare(unix.CLONE_NEWTIME) == nil
	// The host's cgroup file system is still in view: keep the OOM counter
	// open for the agent.
	oom, err := unix.Open(cfg.OOMFile, unix.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open oom counter: %w", err)
	}
	if err := unix.Dup3(oom, inside.FDOOM, 0); err != nil {
		return fmt.Errorf("place oom counter: %w", err)
	}
	unix.Close(oom)
	self, err := unix.Open("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open own binary: %w", err)
	}
	root, err := buildRoot(cfg)
	if err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.ID)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if cfg.OwnNet {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	if err := pivot(root); err != nil {
		return err
	}
	if err := inside.DropCaps(); err != nil {
		return err
	}
	if inPlace {
		if err := inside.Capset(inside.AllThreads); err != nil {
			return err
		}
	}
	if err := inside.LoadSeccomp(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if inPlace {
		unix.Close(self)
		os.Clearenv()
		os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
		os.Setenv("HOME", "/root")
		ready, oom := inside.AgentFDs()
		inside.RunAgentHere(cfg.Env, cfg.Agent, ready, oom)
	}
	env, _ := json.Marshal(cfg.Env)
	agent, _ := json.Marshal(cfg.Agent)
	argv := []string{inside.AgentArg0}
	envv := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
		inside.EnvSandboxEnv + "=" + string(env), inside.EnvAgentSettings + "=" + string(agent)}
	return fmt.Errorf("exec agent: %w", execveat(self, argv, envv))
}

// execveat executes the file open at fd (AT_EMPTY_PATH): the cove binary,
// opened before pivot_root hid the host's tree.
func execveat(fd int, argv, envv []string) error {
	empty, err := unix.BytePtrFromString("")
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envvp, err := syscall.SlicePtrFromStrings(envv)
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envvp[0])), unix.AT_EMPTY_PATH, 0)
	return errno
}

// pivot makes root the process's / and detaches the host's tree.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("chdir %s: %w", root, err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

// loopbackUp brings up lo in the sandbox's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}
