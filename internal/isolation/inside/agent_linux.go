package inside

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

// IsAgent reports whether this process was started as the agent (by a
// sandbox's init, or by another runtime at AgentPath); with arguments it
// is a command of main's.
func IsAgent() bool {
	return (os.Args[0] == AgentArg0 || os.Args[0] == AgentPath) && len(os.Args) == 1
}

// AgentMain is the agent as the sandbox's PID 1, exec'd by the namespaces
// driver's sandbox init (or started by another runtime).
func AgentMain() int {
	fixed, settings, err := agentEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready, oom := AgentFDs()
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

// AgentFDs are the readiness pipe and OOM counter an agent started by the
// init inherits; an agent started by another runtime (gVisor's runsc, which
// sets EnvNoFDs) has no pipe, and opens the OOM counter EnvOOMFile names.
func AgentFDs() (ready, oom int) {
	if os.Getenv(EnvNoFDs) == "" {
		unix.CloseOnExec(FDLayer) // the agent's alone
		return FDReady, FDOOM
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

// RunAgentHere runs the agent, which exits the process when it ends, and
// makes the calling (locked) thread fork every process of the sandbox:
// the thread whose capabilities and filter they inherit.
func RunAgentHere(env map[string]string, a isolation.AgentSettings, ready, oom int) {
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
	cfg := envd.RunConfig{Fixed: fixed, ReadyFD: ready, OOMFD: oom, Spawn: spawn, NewBoot: NewBootID, Initial: settings.Update{
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
