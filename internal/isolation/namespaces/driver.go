// Package namespaces is Cove's default isolation driver: each sandbox is a
// process tree in new pid, mount, uts, ipc, net and cgroup namespaces, in
// its own cgroup, on an overlay root with a size-capped writable layer,
// with a small capability set, no_new_privs and a seccomp filter. It needs
// no KVM and no helper binaries: the cove binary re-executes itself as the
// sandbox's init (package nsinit), which then becomes the agent.
package namespaces

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
)

// Config configures the driver.
type Config struct {
	// Dir holds one directory per sandbox (state, agent log, mount points).
	Dir string
	// CgroupParent names the group, under the node's own cgroup, that holds
	// the sandboxes' groups. Default "cove".
	CgroupParent string
	// Binary is the cove binary to re-execute; default /proc/self/exe,
	// which a user-namespaced child can exec even when the binary's
	// directory is closed to it.
	Binary string
	// SandboxBinary, when set, is re-executed instead of Binary: a build
	// holding only the init and agent (cmd/cove-sandbox), which starts
	// faster. A user-namespaced child executes it through a descriptor,
	// whatever the binary's directory allows it.
	SandboxBinary string
	// UserNSBase is the first host uid and gid of user-namespaced
	// sandboxes (each has a range of its own above it); DefaultUserNSBase
	// when zero.
	UserNSBase uint32
	// UserNamespaces runs every sandbox in a user namespace of its own
	// (but those over a host writable layer: template builds), as if its
	// spec asked for one.
	UserNamespaces bool
	// LXCFS, when set, is a host directory with lxcfs mounted: its proc
	// files (package inside's lxcfsFiles) are bound over each sandbox's, so they tell the
	// sandbox's own memory, CPUs and uptime.
	LXCFS string
}

// Driver implements isolation.Driver with Linux namespaces.
type Driver struct {
	cfg  Config
	log  *slog.Logger
	host *os.File // the node's own network namespace, to return to after Dial
	// agent is the sandbox binary's path, bound at inside.AgentPath in sandboxes.
	agent string

	// spawner clones the sandboxes' inits (spawner_linux.go).
	spawner *spawner
	// hostTime names the node's own time namespace, which a sandbox
	// whose init has no other for its processes shares (startClocks).
	hostTime string

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	ids       *idRanges // user namespaces' host id ranges
}

var (
	_ isolation.Driver      = (*Driver)(nil)
	_ isolation.Lister      = (*Driver)(nil)
	_ isolation.Stater      = (*Driver)(nil)
	_ isolation.HandOverer  = (*Driver)(nil)
	_ isolation.AgentLogger = (*Driver)(nil)
	_ isolation.Pauser      = (*Driver)(nil)
	_ isolation.Resizer     = (*Driver)(nil)
)

// sandbox is one live sandbox the driver owns.
type sandbox struct {
	id     string
	handle isolation.Handle
	cg     *cgroups.Group
	// netns is the sandbox's network namespace; nsMu guards it: Destroy
	// closes it while Dials may still be using it.
	nsMu  sync.RWMutex
	netns *os.File
	// limMu guards limits, which a resize changes.
	limMu  sync.Mutex
	limits isolation.Limits
	idBase uint32 // its user namespace's first host id (0: none)

	destroying atomic.Bool
	end        *hostproc.End // set when the init has exited
}

// New returns a driver keeping its state under cfg.Dir.
func New(cfg Config, log *slog.Logger) (*Driver, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("namespaces driver: no directory")
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "cove"
	}
	if cfg.Binary == "" {
		cfg.Binary = "/proc/self/exe"
	}
	if b := cfg.SandboxBinary; b != "" {
		if st, err := os.Stat(b); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("sandbox binary %s is not an executable file", b)
		}
	}
	if cfg.UserNSBase == 0 {
		cfg.UserNSBase = DefaultUserNSBase
	}
	agent := cfg.SandboxBinary
	if agent == "" {
		// A path, not /proc/self/exe: a sandbox's init, in its own mount
		// namespace, cannot bind a file of the node's namespace by its link.
		exe, err := filepath.EvalSymlinks(cfg.Binary)
		if err == nil {
			exe, err = filepath.Abs(exe)
		}
		if err != nil {
			return nil, fmt.Errorf("the sandbox binary %s: %w", cfg.Binary, err)
		}
		agent = exe
	}
	// 0711: user-namespaced sandboxes (unprivileged on the host) must be
	// able to reach their own directory, never to list the others.
	if err := os.MkdirAll(cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("create %s: %w", cfg.Dir, err)
	}
	if err := os.Chmod(cfg.Dir, 0o711); err != nil {
		return nil, err
	}
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open own network namespace: %w", err)
	}
	hostTime, err := os.Readlink("/proc/self/ns/time")
	if err != nil {
		host.Close()
		return nil, fmt.Errorf("read own time namespace: %w", err)
	}
	// The spawner runs the smaller sandbox binary where there is one.
	spawnerBinary := cfg.Binary
	if cfg.SandboxBinary != "" {
		spawnerBinary = cfg.SandboxBinary
	}
	return &Driver{cfg: cfg, log: log, host: host, agent: agent, spawner: &spawner{binary: spawnerBinary, log: log}, hostTime: hostTime,
		sandboxes: map[string]*sandbox{}, ids: newIDRanges(cfg.UserNSBase)}, nil
}

// Close releases the driver's handles and removes its cgroup parent if no
// sandbox is left in it. Running sandboxes are not touched.
func (d *Driver) Close() {
	d.spawner.Close()
	d.host.Close()
	cgroups.RemoveEmpty(d.cfg.CgroupParent)
}

// Name implements isolation.Driver.
func (d *Driver) Name() string { return "namespaces" }

// Capabilities implements isolation.Driver.
func (d *Driver) Capabilities() isolation.Capabilities {
	return isolation.Capabilities{Builds: true, UserNamespaces: true, ContainsProcesses: true}
}

func (d *Driver) dir(id string) string { return filepath.Join(d.cfg.Dir, id) }

func (d *Driver) cgroupName(id string) string { return d.cfg.CgroupParent + "/" + id }

func (d *Driver) get(id string) *sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sandboxes[id]
}
