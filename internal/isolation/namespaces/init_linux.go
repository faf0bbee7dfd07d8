package namespaces

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

func init() {
	switch os.Args[0] {
	case initArg0:
		// Package init runs on the main thread with the goroutine locked to
		// it: every namespace change below stays on the thread that execs.
		if err := sandboxInit(); err != nil {
			prefix := "cove sandbox init: "
			if errs.Is(err, errs.InvalidArgument) { // the spec's or template's fault
				prefix = initRefused
			}
			fmt.Fprintf(os.Stderr, "%s%v\n", prefix, err)
			os.Exit(1)
		}
		os.Exit(0) // not reached: sandboxInit execs the agent
	case spawnerArg0:
		runSpawner()
	case agentArg0, AgentPath:
		if len(os.Args) == 1 { // with arguments it is a command of main's
			os.Exit(agentMain())
		}
	}
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
	inPlace := allThreadsSupported
	sys := thisThread // a cgo build execs the agent from this thread
	if inPlace {
		sys = allThreads
	}
	if err := clearSecurebits(sys); err != nil {
		return err
	}
	var cfg initConfig
	mounts, err := receiveMounts(fdConfig)
	if err != nil {
		return err
	}
	f := os.NewFile(fdConfig, "config")
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
	// The host's cgroup file system is still in view: keep the OOM counter
	// open for the agent.
	oom, err := unix.Open(cfg.OOMFile, unix.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open oom counter: %w", err)
	}
	if err := unix.Dup3(oom, fdOOM, 0); err != nil {
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
	if err := dropCaps(); err != nil {
		return err
	}
	if inPlace {
		if err := capset(allThreads); err != nil {
			return err
		}
	}
	if err := loadSeccomp(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if inPlace {
		unix.Close(self)
		os.Clearenv()
		os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
		os.Setenv("HOME", "/root")
		ready, oom := agentFDs()
		runAgentHere(cfg.Env, cfg.Agent, ready, oom)
	}
	env, _ := json.Marshal(cfg.Env)
	agent, _ := json.Marshal(cfg.Agent)
	argv := []string{agentArg0}
	envv := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
		EnvSandboxEnv + "=" + string(env), EnvAgentSettings + "=" + string(agent)}
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

// agentMain is the agent as the sandbox's PID 1, exec'd by sandboxInit.
func agentMain() int {
	fixed, settings, err := agentEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready, oom := agentFDs()
	return runAgent(fixed, settings, ready, oom, nil)
}

// agentEnv takes the agent's start-up settings out of the environment
// (EnvSandboxEnv, EnvAgentSettings).
func agentEnv() (fixed map[string]string, settings isolation.AgentSettings, err error) {
	for name, v := range map[string]any{EnvSandboxEnv: &fixed, EnvAgentSettings: &settings} {
		if s := os.Getenv(name); s != "" {
			if err := json.Unmarshal([]byte(s), v); err != nil {
				return nil, settings, fmt.Errorf("bad %s: %w", name, err)
			}
		}
		os.Unsetenv(name)
	}
	return fixed, settings, nil
}

// agentFDs are the readiness pipe and OOM counter an agent started by the
// init inherits; an agent started by another runtime (gVisor's runsc, which
// sets EnvNoFDs) has no pipe, and opens the OOM counter EnvOOMFile names.
func agentFDs() (ready, oom int) {
	if os.Getenv(EnvNoFDs) == "" {
		unix.CloseOnExec(fdLayer) // the agent's alone
		return fdReady, fdOOM
	}
	path := os.Getenv(EnvOOMFile)
	os.Unsetenv(EnvNoFDs) // not for the sandbox's processes
	os.Unsetenv(EnvOOMFile)
	if path == "" {
		return 0, 0
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "the OOM counter (OOM kills are reported as plain kills): %v\n", err)
		return 0, 0
	}
	return 0, fd
}

type forkRequest struct {
	fork func() (int, error)
	done chan forkResult
}

type forkResult struct {
	pid int
	err error
}

// spawnOn runs forks on the thread that reads requests.
func spawnOn(requests chan<- forkRequest) func(func() (int, error)) (int, error) {
	return func(fork func() (int, error)) (int, error) {
		done := make(chan forkResult, 1)
		requests <- forkRequest{fork, done}
		r := <-done
		return r.pid, r.err
	}
}

// agentLogMax bounds what an agent writes to its log on the host.
const agentLogMax = 8 << 20

// runAgentHere runs the agent, which exits the process when it ends, and
// makes the calling (locked) thread fork every process of the sandbox:
// the thread whose capabilities and filter they inherit.
func runAgentHere(env map[string]string, a isolation.AgentSettings, ready, oom int) {
	forks := make(chan forkRequest)
	go func() { os.Exit(runAgent(env, a, ready, oom, spawnOn(forks))) }()
	for req := range forks {
		pid, err := req.fork()
		req.done <- forkResult{pid, err}
	}
}

// runAgent serves the agent until it fails, with its readiness pipe and
// OOM counter (0: none). spawn, when set, runs the agent's forks.
func runAgent(fixed map[string]string, a isolation.AgentSettings, ready, oom int, spawn func(func() (int, error)) (int, error)) int {
	// Its stderr is a file on the host (agent.log), and code in the
	// sandbox can make it log (a failed download, say): capped. Its JSON
	// lines are the agent's part of the sandbox's logs.
	log := slog.New(slog.NewJSONHandler(logx.Capped(os.Stderr, agentLogMax), &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := envd.RunConfig{Fixed: fixed, ReadyFD: ready, OOMFD: oom, Spawn: spawn, Initial: settings.Update{
		EnvVars: a.EnvVars, DefaultUser: a.DefaultUser,
	}}
	if a.AccessToken != "" {
		cfg.Initial.AccessToken = &a.AccessToken
	}
	if a.DefaultWorkdir != "" {
		cfg.Initial.DefaultWorkdir = &a.DefaultWorkdir
	}
	if err := envd.Run(context.Background(), cfg, log); err != nil {
		log.Error("agent stopped", "err", err)
		return 1
	}
	return 0
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
