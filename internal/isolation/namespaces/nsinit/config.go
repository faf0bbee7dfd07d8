// Package nsinit is the namespaces driver's side inside a sandbox: a
// sandbox's init (it builds the root file system, locks itself down and
// becomes the agent), and the spawner, the small child of the node that
// clones the inits. A binary runs them when main asks Role; they link
// neither the driver nor its cgroups (TestSandboxBinaryLinks).
package nsinit

import "github.com/covesandbox/cove/internal/isolation"

// InitArg0 is the name the cove binary is re-executed under as a
// sandbox's init: Role checks os.Args[0] for it, so the same binary (or a
// test binary) serves as the init (and, by inside.AgentArg0, the agent).
const InitArg0 = "cove-sandbox-init"

// FDConfig is where the sandbox's init reads its Config (JSON, written
// once the init is in its cgroup); the descriptors after it are the
// agent's (inside.FDReady, FDOOM, FDLayer).
const FDConfig = 3

// InitRefused starts the init's last words when the sandbox's spec or
// template is at fault (an invalid-argument error), not the host.
const InitRefused = "cove sandbox init refused: "

// Config is what the driver tells the sandbox's init.
type Config struct {
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
	// ownClock is set when the sandbox's processes get a time namespace
	// of their own, whose /proc/uptime the node sets.
	ownClock bool
}

// A user-namespaced sandbox maps its ids 0..UserNSSize-1 to a host range
// of its own (the driver's Config.UserNSBase + n·UserNSSize): its root and its user are
// host users nobody else is, so the kernel's per-user counts (inotify
// instances, epoll watches, processes …) are the sandbox's own, and no
// file it makes belongs to a host user.
const UserNSSize = 65536
