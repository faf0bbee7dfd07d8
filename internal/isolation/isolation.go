// Package isolation is the contract between the node and the mechanisms
// that isolate a sandbox (namespaces, gVisor and QEMU microVMs). A
// driver creates a sandbox from a Spec, lets the node reach the agent inside
// it, reports how it ended and removes every trace of it. Optional behaviour
// (pause, snapshots, stats) is a separate interface found by type assertion.
package isolation

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/errs"
)

// Driver isolates sandboxes on one host.
type Driver interface {
	// Name identifies the driver ("namespaces").
	Name() string
	// Capabilities says what the driver can do on this host.
	Capabilities() Capabilities
	// Create starts a sandbox whose agent is ready to serve when it
	// returns. ctx bounds the setup only; a cancelled or failed create
	// leaves nothing behind.
	Create(ctx context.Context, id string, spec Spec) (Handle, error)
	// Dial opens a connection to port inside the sandbox.
	Dial(ctx context.Context, id string, port int) (net.Conn, error)
	// Wait blocks until the sandbox's init has ended (or ctx is done) and
	// says why it ended.
	Wait(ctx context.Context, id string) (Exit, error)
	// Destroy ends the sandbox and removes everything it owned. It is
	// idempotent: destroying an unknown or destroyed sandbox is not an error.
	Destroy(ctx context.Context, id string) error
	// Recover re-attaches to a sandbox after the node restarted. It fails
	// with errs.NotFound when the sandbox is gone (the node then Destroys
	// what is left of it).
	Recover(ctx context.Context, h Handle) error
}

// Lister is implemented by drivers that can list the sandboxes they hold
// state for on this host, so the node can remove leftovers nobody claims.
type Lister interface {
	List(ctx context.Context) ([]string, error)
}

// Outdater is implemented by drivers whose sandboxes a change on the host
// can leave behind: one created now would get something this one lacks
// (a microVM guest made before the image of its /usr, which it would need
// to be saved with its memory). The node's warm pool hands out no
// outdated sandbox.
type Outdater interface {
	Outdated(id string) bool
}

// Stater is implemented by drivers that report a sandbox's resource use.
type Stater interface {
	Stats(ctx context.Context, id string) (Stats, error)
}

// AgentLogger is implemented by drivers that keep what a sandbox's agent
// logs (JSON lines): the last max bytes of it, from a line's start.
type AgentLogger interface {
	AgentLog(ctx context.Context, id string, max int64) ([]byte, error)
}

// HandOverer is implemented by drivers with work to do when a warm
// sandbox, made ahead of time (Spec.Background), is handed to its user:
// the normal CPU priority back, and its uptime counted from now.
type HandOverer interface {
	HandOver(ctx context.Context, id string) error
}

// Pauser is implemented by drivers that can freeze a sandbox in place.
type Pauser interface {
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
}

// Resizer is implemented by drivers that can give a paused sandbox other
// CPU and memory limits (l's CPUMillis and MemoryMB; its other limits
// stay), which it runs with from its resume. Memory below what the
// sandbox holds is refused (errs.InvalidArgument), its limits unchanged.
type Resizer interface {
	Resize(ctx context.Context, id string, l Limits) error
}

// LayerSaver is implemented by drivers that can copy what a sandbox wrote
// over its template's layers — its writable layer — as a layer of its own
// (snapshots, fork, pause without memory). The node pauses the sandbox
// first, so that nothing changes during the copy.
type LayerSaver interface {
	// SaveLayer copies the paused sandbox's writable layer to dst, which
	// must not exist: files, directories, links, whiteouts and opaque
	// directories, modes, times, and owners as the sandbox sees them.
	// Nothing in it is followed.
	SaveLayer(ctx context.Context, id, dst string) error
}

// SelfContainedUpper are the overlay options every sandbox's root is
// mounted with, so that its writable layer stands alone and can become a
// layer (LayerSaver): no directory renamed by reference to a lower layer,
// no file whose data stays in a lower one.
const SelfContainedUpper = "redirect_dir=nofollow,metacopy=off,index=off"

// Checkpointer is implemented by drivers that can save a running sandbox
// whole — its processes' memory included — and bring it back. Checkpoint
// writes the image under dir and stops the sandbox (its Wait reports
// ExitCheckpointed; its files and limits stay for Restore). Restore runs it
// again from that image under the same id: the processes go on where they
// were. netns, when set, is the network namespace it runs in then (a node
// that restarted meanwhile gives it a new one); nil keeps its own.
type Checkpointer interface {
	Checkpoint(ctx context.Context, id, dir string) error
	Restore(ctx context.Context, id, dir string, netns *os.File) (Handle, error)
}

// Cloner is implemented by drivers that can copy a running sandbox whole
// into new ones (fork): its processes go on in each copy where they were.
// Image writes sandbox id's processes — their memory and kernel state —
// under dir and leaves it as it was (running, or paused: the node pauses
// it around the copy of its files, so that both match). Clone makes
// sandbox id from spec, whose root must show the files the image's
// sandbox had (its layers and its saved writable layer), and runs the
// image's processes in it under its own hostname, network and limits.
type Cloner interface {
	Image(ctx context.Context, id, dir string) error
	Clone(ctx context.Context, id string, spec Spec, image string) (Handle, error)
}

// Capabilities describe a driver on this host.
type Capabilities struct {
	UserNamespaces bool // sandboxes may ask for a user namespace
	// Builds: the driver runs template builds' steps (Spec.RootFS.Upper).
	Builds bool
	// ContainsProcesses: a process that exhausts the sandbox's memory or
	// pids is stopped alone (killed, or refused a fork) and the sandbox
	// goes on, and signals from inside cannot end the agent. Without it
	// (gVisor: one host process runs the whole sandbox) such a process
	// may end the sandbox (a memory hog is often killed alone, and
	// reported so, but not always), and the end is reported.
	ContainsProcesses bool
}

// Spec is what a sandbox is made of.
type Spec struct {
	RootFS RootFS
	Limits Limits
	// Env are variables every process in the sandbox sees (E2B_SANDBOX_ID …).
	Env map[string]string
	// Agent is what the agent starts with (what POST /init would set), so a
	// create needs no round trip to it.
	Agent AgentSettings
	// UserNamespace runs the sandbox in its own user namespace, so its root
	// is an unprivileged user on the host.
	UserNamespace bool
	// NetNS, when set, is the network namespace the sandbox runs in (made
	// and wired by the node's network pool, which may reuse it after the
	// sandbox); nil gives it an empty one with loopback only. The driver
	// does not keep it open.
	NetNS *os.File
	// DNS are the resolvers written to the sandbox's /etc/resolv.conf.
	DNS []string
	// Background starts the sandbox at a low CPU priority (nice 10), so
	// making it ahead of time yields to sandboxes in use; HandOver
	// (HandOverer) restores it.
	Background bool
}

// AgentSettings are the agent's start-up settings.
type AgentSettings struct {
	EnvVars        map[string]string `json:"envVars,omitempty"`
	AccessToken    string            `json:"accessToken,omitempty"`
	DefaultUser    string            `json:"defaultUser,omitempty"`
	DefaultWorkdir string            `json:"defaultWorkdir,omitempty"`
}

// RootFS is a sandbox's file system: read-only layers stacked by overlayfs
// (lowest first) under a private writable layer, plus read-only binds of
// host directories (the base template's /usr …).
type RootFS struct {
	Layers []string
	Binds  []Bind
	// Upper, when set, is an empty host directory that holds the writable
	// layer (under upper/) instead of a size-capped tmpfs: what a template
	// build step writes there becomes its next layer. The disk limit does
	// not apply to it.
	Upper string
}

// Bind mounts a host path read-only at Target inside the sandbox.
type Bind struct {
	Source string
	Target string
	// Writable makes a read-write bind (a volume; still nosuid and nodev),
	// whose mount point is made inside the sandbox's root if missing.
	// Binds are read-only otherwise.
	Writable bool `json:",omitempty"`
}

// Limits are a sandbox's resources.
type Limits struct {
	CPUMillis int64 // 1000 = one core
	MemoryMB  int64
	DiskMB    int64 // size of the writable layer
	PIDs      int64
}

// Limits' accepted ranges.
const (
	MinMemoryMB = 64
	MaxMemoryMB = 65536
	MinDiskMB   = 16
	MaxDiskMB   = 262144
	MinPIDs     = 16
	MaxPIDs     = 65536
	MinCPU      = 10
	MaxCPU      = 64000
)

// Validate checks every limit is set and within range.
func (l Limits) Validate() error {
	switch {
	case l.CPUMillis < MinCPU || l.CPUMillis > MaxCPU:
		return errs.New(errs.InvalidArgument, "cpu must be between %d and %d millicores, got %d", MinCPU, MaxCPU, l.CPUMillis)
	case l.MemoryMB < MinMemoryMB || l.MemoryMB > MaxMemoryMB:
		return errs.New(errs.InvalidArgument, "memory must be between %d and %d MB, got %d", MinMemoryMB, MaxMemoryMB, l.MemoryMB)
	case l.DiskMB < MinDiskMB || l.DiskMB > MaxDiskMB:
		return errs.New(errs.InvalidArgument, "disk must be between %d and %d MB, got %d", MinDiskMB, MaxDiskMB, l.DiskMB)
	case l.PIDs < MinPIDs || l.PIDs > MaxPIDs:
		return errs.New(errs.InvalidArgument, "pids must be between %d and %d, got %d", MinPIDs, MaxPIDs, l.PIDs)
	}
	return nil
}

// idPattern is compiled at its first use, not at every process's start:
// each sandbox's init links this package.
var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })

// ValidateID checks a sandbox id is safe to use in paths and host names.
func ValidateID(id string) error {
	if !idPattern().MatchString(id) {
		return errs.New(errs.InvalidArgument, "invalid sandbox id %q: want 1-63 of [a-z0-9-], starting with a letter or digit", id)
	}
	return nil
}

// Handle is what the node keeps about a sandbox to find it again after a
// restart. It is plain data, stored as JSON.
type Handle struct {
	ID        string    `json:"id"`
	Driver    string    `json:"driver"`
	PID       int       `json:"pid"`       // the sandbox's init, as the host sees it
	StartTime uint64    `json:"startTime"` // the init's start time in clock ticks, against pid reuse
	CreatedAt time.Time `json:"createdAt"`
}

// Exit says how a sandbox ended.
type Exit struct {
	Reason ExitReason `json:"reason"`
	Detail string     `json:"detail,omitempty"`
}

// ExitReason classifies a sandbox's end.
type ExitReason string

const (
	ExitDestroyed ExitReason = "destroyed" // Destroy ended it
	ExitOOM       ExitReason = "oom"       // the agent was killed for memory
	ExitCrashed   ExitReason = "crashed"   // the agent died on its own
	// ExitCheckpointed: a Checkpointer saved it and stopped it; Restore
	// brings it back.
	ExitCheckpointed ExitReason = "checkpointed"
)

// Stats is a sandbox's resource use.
type Stats struct {
	CPUUsage    time.Duration
	CPUMillis   int64
	MemoryUsage uint64
	MemoryLimit uint64
	MemoryCache uint64
	DiskUsed    uint64
	DiskTotal   uint64
	PIDs        uint64
	OOMKills    uint64
	// EgressConnections is what the sandbox holds open through the
	// node's egress proxy (the node fills it in, not the driver).
	EgressConnections uint64
}

// WritableBytes is the size of a sandbox's writable layer: its disk, or
// less. The layer is a tmpfs whose pages count against the sandbox's memory
// limit, so a disk as large as the memory would let a full disk leave no
// memory to run anything (the agent included) and end in the OOM killer
// rather than in "No space left on device". A quarter of the memory (at
// least 64 MiB) stays for processes.
func (l Limits) WritableBytes() int64 {
	mem := l.MemoryMB << 20
	return max(min(l.DiskMB<<20, mem-max(64<<20, mem/4)), MinDiskMB<<20)
}

// ShmBytes is the size of a sandbox's /dev/shm: half its memory, at most
// 64 MiB (Docker's default).
func (l Limits) ShmBytes() int64 { return min(64<<20, l.MemoryMB<<19) }

// TmpfsLimits are the mount options that cap a tmpfs at bytes, and its
// inodes at one per 16 KiB (ext4's default ratio, at least 4096): without
// that cap a sandbox could make millions of empty files, each one kernel
// memory.
func TmpfsLimits(bytes int64) string {
	return "size=" + strconv.FormatInt(bytes, 10) + ",nr_inodes=" + strconv.FormatInt(max(bytes/(16<<10), 4096), 10)
}

// MaxPTYs is how many pseudo-terminals one sandbox may hold at once (its
// devpts instance's max=). The kernel shares one pool (kernel.pty.max less
// the host's reserve) among every devpts instance: without a cap of its
// own, one sandbox could take them all and leave its neighbours none.
const MaxPTYs = 64

// ValidateSpec checks what every driver needs of a sandbox: its id, its
// limits, usable layer directories, an absolute host writable layer, and
// binds with absolute, clean paths.
func ValidateSpec(id string, spec Spec) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if err := spec.Limits.Validate(); err != nil {
		return err
	}
	if len(spec.RootFS.Layers) == 0 {
		return errs.New(errs.InvalidArgument, "the root file system has no layer")
	}
	for _, l := range spec.RootFS.Layers {
		if st, err := os.Stat(l); err != nil || !st.IsDir() || strings.ContainsAny(l, ":,") {
			return errs.New(errs.InvalidArgument, "template layer %s is not a usable directory", l)
		}
	}
	if u := spec.RootFS.Upper; u != "" {
		if st, err := os.Stat(u); err != nil || !st.IsDir() || !filepath.IsAbs(u) || strings.ContainsAny(u, ":,") {
			return errs.New(errs.InvalidArgument, "writable layer %s is not a usable directory", u)
		}
	}
	for _, b := range spec.RootFS.Binds {
		if !filepath.IsAbs(b.Source) || !filepath.IsAbs(b.Target) || strings.Contains(b.Target, "..") {
			return errs.New(errs.InvalidArgument, "bind %s -> %s must use absolute, clean paths", b.Source, b.Target)
		}
	}
	return nil
}
