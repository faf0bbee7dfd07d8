// Package gvisor isolates each sandbox with gVisor: runsc runs the agent as
// the sandbox's init on gVisor's own user-space kernel (the sentry, on the
// systrap platform: no KVM), so the sandbox's code never talks to the host
// kernel directly. The root file system is the same template layers the
// namespaces driver stacks (an overlay on the host under a size-capped
// tmpfs, served to the sandbox by runsc's gofer); limits are the sandbox's
// own cgroup, which runsc joins; the network is the namespace the node's
// pool made, used through the host kernel's stack inside it
// (`--network=host` within that namespace: runsc never touches the host's
// own network).
package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/logx"
)

// Config configures the driver.
type Config struct {
	// Dir holds one directory per sandbox (bundle, mounts, state) and
	// runsc's own state (runsc/).
	Dir string
	// CgroupParent names the group, under the node's own cgroup, that holds
	// the sandboxes' groups. Default "cove".
	CgroupParent string
	// Runsc is the runsc binary; default: runsc on PATH.
	Runsc string
	// SandboxBinary is the binary that becomes the agent inside each
	// sandbox (cove-sandbox, or cove itself), bound read-only at
	// inside.AgentPath.
	SandboxBinary string
	// Platform is runsc's platform; default systrap (needs no KVM).
	Platform string
}

// Driver implements isolation.Driver with gVisor.
type Driver struct {
	cfg  Config
	log  *slog.Logger
	host *os.File // the node's own network namespace, to return to after Dial

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	saved     map[string]*os.File // checkpointed sandboxes' network namespaces, held for Restore

	// orphans are the runsc checkpoints a stopped node left running, by
	// sandbox (orphans.go), found at the first Recover.
	orphansOnce sync.Once
	orphans     map[string][]int
}

var (
	_ isolation.Driver       = (*Driver)(nil)
	_ isolation.Lister       = (*Driver)(nil)
	_ isolation.Stater       = (*Driver)(nil)
	_ isolation.Pauser       = (*Driver)(nil)
	_ isolation.Checkpointer = (*Driver)(nil)
	_ isolation.AgentLogger  = (*Driver)(nil)
	_ isolation.Resizer      = (*Driver)(nil)
)

type sandbox struct {
	id     string
	handle isolation.Handle
	cg     *cgroups.Group
	// limMu guards limits, which a resize changes.
	limMu  sync.Mutex
	limits isolation.Limits

	destroying   atomic.Bool
	checkpointed atomic.Bool   // its end is a checkpoint's
	end          *hostproc.End // set when the sandbox's runsc process has exited
}

// Available says whether runsc at path (PATH's when empty) can run here,
// and why not.
func Available(path string) (string, error) {
	if path == "" {
		p, err := exec.LookPath("runsc")
		if err != nil {
			return "", fmt.Errorf("gVisor is not available: runsc is not on PATH (make installs it in bin/; or pass its path)")
		}
		path = p
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("gVisor is not available: %s --version: %v: %s", path, err, bytes.TrimSpace(out))
	}
	return path, nil
}

// New returns a driver keeping its state under cfg.Dir, or an error saying
// why gVisor cannot run here.
func New(cfg Config, log *slog.Logger) (*Driver, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("gvisor driver: no directory")
	}
	runsc, err := Available(cfg.Runsc)
	if err != nil {
		return nil, err
	}
	cfg.Runsc = runsc
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "cove"
	}
	if cfg.Platform == "" {
		cfg.Platform = "systrap"
	}
	if st, err := os.Stat(cfg.SandboxBinary); cfg.SandboxBinary == "" || err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gvisor driver: the sandbox binary %q is not a file", cfg.SandboxBinary)
	}
	for _, d := range []string{cfg.Dir, filepath.Join(cfg.Dir, runscState)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open own network namespace: %w", err)
	}
	return &Driver{cfg: cfg, log: log, host: host, sandboxes: map[string]*sandbox{}, saved: map[string]*os.File{}}, nil
}

// runscState is runsc's own state directory under Config.Dir.
const runscState = ".runsc"

// Close releases the driver's handles and, when no sandbox is left, what
// runsc keeps for all of them (its "null" network namespace, a mount in its
// state directory) and the cgroup parent. Running sandboxes are not
// touched.
func (d *Driver) Close() {
	d.host.Close()
	if ids, err := d.List(context.Background()); err == nil && len(ids) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := unmount(ctx, filepath.Join(d.cfg.Dir, runscState, "null-netns")); err != nil {
			d.log.Warn("unmount runsc's null network namespace", logx.Err(err))
		}
	}
	cgroups.RemoveEmpty(d.cfg.CgroupParent)
}

// Name implements isolation.Driver.
func (d *Driver) Name() string { return "gvisor" }

// Capabilities implements isolation.Driver.
func (d *Driver) Capabilities() isolation.Capabilities {
	return isolation.Capabilities{Builds: true}
}

func (d *Driver) dir(id string) string { return filepath.Join(d.cfg.Dir, id) }

func (d *Driver) cgroupName(id string) string { return d.cfg.CgroupParent + "/" + id }

func (d *Driver) get(id string) *sandbox {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sandboxes[id]
}

// runsc runs one runsc command and returns its standard output. Its
// output goes to files, never pipes: `runsc create` leaves the sandbox's
// processes behind, holding whatever it was given, and a pipe would never
// reach its end. The files are unlinked as soon as they are made and read
// through their descriptors, so that a node killed during the call leaves
// none behind.
func (d *Driver) runsc(ctx context.Context, args ...string) ([]byte, error) {
	return d.runscLogged(ctx, "", args...)
}

// runscLogged is runsc whose standard error, when agentLog is set, is
// that file (appended to): what `runsc create` and `restore` leave the
// sandbox's agent for its log.
func (d *Driver) runscLogged(ctx context.Context, agentLog string, args ...string) ([]byte, error) {
	global := []string{"--root", filepath.Join(d.cfg.Dir, runscState), "--platform", d.cfg.Platform,
		"--network", "host", "--overlay2", "none", "--oci-seccomp"}
	stdout, err := d.unlinkedTemp()
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	var stderr *os.File
	if agentLog != "" {
		stderr, err = os.OpenFile(agentLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	} else {
		stderr, err = d.unlinkedTemp()
	}
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	cmd := exec.CommandContext(ctx, d.cfg.Runsc, append(global, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	runErr := cmd.Run()
	out, _ := readAll(stdout)
	if runErr != nil {
		var msg []byte
		if agentLog != "" {
			msg, _ = os.ReadFile(agentLog)
		} else {
			msg, _ = readAll(stderr)
		}
		return out, fmt.Errorf("runsc %s: %w: %s", args[0], runErr, lastLines(string(msg), 3))
	}
	return out, nil
}

// unlinkedTemp is a new file under Config.Dir with no name.
func (d *Driver) unlinkedTemp() (*os.File, error) {
	f, err := os.CreateTemp(d.cfg.Dir, ".runsc-output-")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readAll reads all of f, whatever its offset.
func readAll(f *os.File) ([]byte, error) {
	return io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
