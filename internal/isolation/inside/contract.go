// Package inside is what every driver puts inside a sandbox, whatever
// isolates it (Linux namespaces, gVisor's kernel, a microVM's guest): the
// agent (the sandbox binary started under AgentArg0 or at AgentPath), what
// it reads at its start (EnvSandboxEnv, EnvAgentSettings, the descriptors
// FDReady, FDOOM, FDLayer or EnvNoFDs), the lock-down of every process in
// it (capabilities, securebits, the seccomp filter with DeniedSyscalls)
// and its /proc and /dev (MountProc, MountDev). No driver imports another:
// each imports this.
package inside

// AgentArg0 is the name the sandbox binary runs under as the agent (a
// sandbox's init execs it so); AgentPath is where another runtime (gVisor)
// finds the binary inside a sandbox, and started from there it is the
// agent too.
const (
	AgentArg0 = "cove-envd"
	AgentPath = "/.cove/cove-envd"
)

// Descriptors the agent inherits from a sandbox's init.
const (
	FDReady = 4 // the agent writes one byte here once it listens
	FDOOM   = 5 // the cgroup file counting OOM kills, opened by the init
	// FDLayer is the writable layer's file system (O_PATH), which the
	// agent keeps open: after pivot_root nothing else reaches it, and the
	// node copies it from there (SaveLayer, /proc/<init>/fd/6/upper).
	FDLayer = 6
)

// EnvSandboxEnv carries the sandbox's fixed variables to the exec'd agent,
// EnvAgentSettings its start-up settings; both JSON, unset once read.
const (
	EnvSandboxEnv    = "COVE_SANDBOX_ENV"
	EnvAgentSettings = "COVE_AGENT_SETTINGS"
	// EnvNoFDs, set for an agent another runtime starts, says it inherited
	// no readiness pipe and no OOM counter.
	EnvNoFDs = "COVE_AGENT_NO_FDS"
	// EnvOOMFile, with EnvNoFDs, names the file inside the sandbox (bound
	// there by that runtime) whose "oom_kill" line counts its OOM kills.
	EnvOOMFile = "COVE_AGENT_OOM_FILE"
	// OOMPath is where the gVisor driver binds it.
	OOMPath = "/.cove/oom"
)
