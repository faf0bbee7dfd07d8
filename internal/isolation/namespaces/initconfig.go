package namespaces

import "github.com/covesandbox/cove/internal/isolation"

// Process names the cove binary is re-executed under. Package init checks
// os.Args[0] for them, so the same binary (or a test binary) serves as the
// sandbox's init and agent.
const (
	initArg0  = "cove-sandbox-init"
	agentArg0 = "cove-envd"
	// AgentPath is where another runtime (gVisor) finds the sandbox binary
	// inside a sandbox; started under that name it is the agent.
	AgentPath = "/.cove/cove-envd"
)

// Descriptors the sandbox's init inherits.
const (
	fdConfig = 3 // the initConfig, JSON, written once the init is in its cgroup
	fdReady  = 4 // the agent writes one byte here once it listens
	fdOOM    = 5 // the cgroup file counting OOM kills, opened by the init
	// fdLayer is the writable layer's file system (O_PATH), which the
	// agent keeps open: after pivot_root nothing else reaches it, and the
	// node copies it from there (SaveLayer, /proc/<init>/fd/6/upper).
	fdLayer = 6
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

// initRefused starts the init's last words when the sandbox's spec or
// template is at fault (an invalid-argument error), not the host.
const initRefused = "cove sandbox init refused: "

// initConfig is what the driver tells the sandbox's init.
type initConfig struct {
	ID        string                  `json:"id"`
	Dir       string                  `json:"dir"` // the sandbox's directory on the host
	Layers    []string                `json:"layers"`
	Binds     []isolation.Bind        `json:"binds"`
	Upper     string                  `json:"upper,omitempty"` // a host directory as the writable layer
	DiskBytes int64                   `json:"diskBytes"`
	ShmBytes  int64                   `json:"shmBytes"`
	Env       map[string]string       `json:"env"`
	UserNS    bool                    `json:"userns"`  // in a user namespace: no mknod
	OOMFile   string                  `json:"oomFile"` // host path of the cgroup OOM kill counter
	OwnNet    bool                    `json:"ownNet"`  // a fresh network namespace: bring lo up
	DNS       []string                `json:"dns"`     // resolvers for /etc/resolv.conf
	Agent     isolation.AgentSettings `json:"agent"`
	// LXCFS is the host directory of a mounted lxcfs whose proc files
	// are bound over the sandbox's ("" = none).
	LXCFS  string           `json:"lxcfs,omitempty"`
	Mounts []isolation.Bind `json:"-"`
	// layerFDs and bindFDs are the id-mapped mounts of Layers and Binds
	// that came with the config (UserNS).
	layerFDs, bindFDs []int
}
