package microvm

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/inside"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
	"github.com/covesandbox/cove/internal/logx"
)

// DriverConfig configures the driver.
type DriverConfig struct {
	// Dir holds one directory per sandbox, and the guests' initramfs.
	Dir string
	// SandboxBinary is the guest's init and agent (cove-sandbox).
	SandboxBinary string
	QEMU          string // "" = qemu-system-x86_64 from PATH
	Virtiofsd     string // "" = QEMU's, /usr/lib/qemu/virtiofsd
	KernelDir     string // "" = DefaultKernelDir
	// CgroupParent holds each guest's cgroup (QEMU and its virtiofsds),
	// relative to the node's own ("" = "cove").
	CgroupParent string
	// BindImages gives guests the read-only binds of their templates (the
	// base template's /usr) as erofs images of them, made in the
	// background at the first guest that binds each and again when the
	// directory changes (bindImages), instead of over virtiofs: QEMU can
	// then save such guests (pause with memory, fork, snapshots). An
	// image takes disk in Dir: 3.8 GB for a /usr of 6.6 GB.
	BindImages bool
	// BindRecheck is how often a bound directory's fingerprint is taken
	// again to find whether it changed (0: defaultBindRecheck).
	BindRecheck time.Duration
	// BootSnapshots starts guests from a boot snapshot of their template
	// and limits (bootSnapshot), made at the first such create, instead
	// of booting each: their memory is then the snapshot's file, shared
	// copy-on-write. Guests that share a directory over virtiofs boot.
	BootSnapshots bool
	Log           *slog.Logger
}

// defaultBindRecheck: a fingerprint of this host's /usr (190 000 entries)
// takes about 1.5 s.
const defaultBindRecheck = 10 * time.Minute

// Driver runs each sandbox in a microVM.
type Driver struct {
	cfg    DriverConfig
	kernel Kernel
	initrd string
	kvm    bool // guests run under KVM (/dev/kvm opened at the start)

	packMu sync.Mutex
	packed bool

	imageMu sync.Mutex // makeImage

	binds *bindImages // nil: binds are virtiofs shares

	snapMu     sync.Mutex               // the snapshots' directory, snapMaking
	snapMaking map[string]chan struct{} // the snapshots being made: closed when done
	snapUse    sync.RWMutex             // a guest starting from a snapshot (read), evictSnapshots

	mu  sync.Mutex
	vms map[string]*sandboxVM
	// held are the pool's network namespaces of checkpointed guests,
	// kept for their Restore.
	held map[string]*os.File
}

type sandboxVM struct {
	vm        *VM
	cg        *cgroups.Group
	limits    isolation.Limits
	shares    []HostShare // as recorded: Outdated
	destroyed bool
	// checkpointed: Checkpoint saved and stopped it.
	checkpointed bool
}

var (
	_ isolation.Driver      = (*Driver)(nil)
	_ isolation.Lister      = (*Driver)(nil)
	_ isolation.Outdater    = (*Driver)(nil)
	_ isolation.Stater      = (*Driver)(nil)
	_ isolation.AgentLogger = (*Driver)(nil)
	_ isolation.Pauser      = (*Driver)(nil)
)

// staticBinary refuses a guest init that needs a dynamic loader: a guest
// has no C library, and such an init makes its kernel panic at boot.
func staticBinary(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return errs.New(errs.Unavailable, "microvm: the guests' init %s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errs.New(errs.Unavailable, "microvm: the guests' init %s is dynamically linked (a cgo build), and a guest has no C library: "+
				"build it with CGO_ENABLED=0, as make build does, or put make build's cove-sandbox beside cove", path)
		}
	}
	return nil
}

// NewDriver checks QEMU, virtiofsd and the guest kernel.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if cfg.QEMU == "" {
		p, err := exec.LookPath("qemu-system-x86_64")
		if err != nil {
			return nil, errs.New(errs.Unavailable, "microvm: no qemu-system-x86_64 (Debian's qemu-system-x86)")
		}
		cfg.QEMU = p
	}
	if cfg.Virtiofsd == "" {
		cfg.Virtiofsd = "/usr/lib/qemu/virtiofsd"
	}
	if _, err := os.Stat(cfg.Virtiofsd); err != nil {
		return nil, errs.New(errs.Unavailable, "microvm: no virtiofsd at %s", cfg.Virtiofsd)
	}
	if _, err := exec.LookPath("mkfs.erofs"); err != nil {
		return nil, errs.New(errs.Unavailable, "microvm: no mkfs.erofs (Debian's erofs-utils), which makes the guests' layer images")
	}
	if err := staticBinary(cfg.SandboxBinary); err != nil {
		return nil, err
	}
	k, err := FindKernel(cmp.Or(cfg.KernelDir, DefaultKernelDir))
	if err != nil {
		return nil, err
	}
	// QEMU's and virtiofsd's options are comma-separated: the paths in
	// them (under Dir) may hold none.
	if strings.ContainsAny(cfg.Dir, ",=") {
		return nil, errs.New(errs.InvalidArgument, "microvm: the directory %q may hold no ',' or '='", cfg.Dir)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, kernel: k, initrd: filepath.Join(cfg.Dir, "initramfs.cpio"), kvm: KVMAvailable(), vms: map[string]*sandboxVM{}, held: map[string]*os.File{},
		snapMaking: map[string]chan struct{}{}}
	if err := d.pruneImages(); err != nil {
		return nil, err
	}
	if err := pruneBindImages(cfg.Dir, !cfg.BindImages); err != nil {
		return nil, err
	}
	if err := d.removeSnapshots(); err != nil {
		return nil, err
	}
	if cfg.BindImages {
		d.binds = newBindImages(cfg.Dir, cmp.Or(cfg.BindRecheck, defaultBindRecheck), cmp.Or(cfg.Log, slog.Default()))
	}
	return d, nil
}

// Close ends the driver's work in the background (a bind image being
// made); its guests run on.
func (d *Driver) Close() {
	if d.binds != nil {
		d.binds.close()
	}
}

// packInitramfs packs the guests' initramfs once, at the first create (a
// node that never starts a guest spends nothing on it).
func (d *Driver) packInitramfs() error {
	d.packMu.Lock()
	defer d.packMu.Unlock()
	if d.packed {
		return nil
	}
	tmp := d.initrd + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = WriteInitramfs(f, d.kernel, d.cfg.SandboxBinary)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.initrd)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("the guests' initramfs: %w", err)
	}
	d.packed = true
	return nil
}

// Name implements isolation.Driver.
func (d *Driver) Name() string { return "microvm" }

// Capabilities implements isolation.Driver.
func (d *Driver) Capabilities() isolation.Capabilities {
	return isolation.Capabilities{ContainsProcesses: true}
}

// vmmOverheadMB is QEMU's and the virtiofsds' memory beyond the guest's,
// and vmmPIDs their threads at most.
func vmmOverheadMB(kvm bool) int64 {
	if kvm {
		return 64
	}
	return 64 + tcgCacheMB
}

const vmmPIDs = 512

// guestOverheadMB is the guest's memory beyond its sandbox's limit: the
// kernel, the initramfs and the init. Untouched pages cost the host
// nothing.
const guestOverheadMB = 96

// guestPath is the agent's PATH.
const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// writableImage is a guest's writable disk in its directory.
const writableImage = "writable.ext4"

func (d *Driver) dir(id string) string { return filepath.Join(d.cfg.Dir, id) }

func (d *Driver) cgroupName(id string) string { return cmp.Or(d.cfg.CgroupParent, "cove") + "/" + id }

// Create implements isolation.Driver: the guest overlays the images of
// the sandbox's layers (read-only disks, made at the first guest of each
// layer) under an ext4 disk of the disk limit, and sees its binds as
// virtiofs shares, or the read-only ones as their images (BindImages)
// once made; it returns once the guest's agent answers.
func (d *Driver) Create(ctx context.Context, id string, spec isolation.Spec) (h isolation.Handle, err error) {
	if err := isolation.ValidateSpec(id, spec); err != nil {
		return h, err
	}
	if err := ctx.Err(); err != nil {
		return h, errs.Mark(errs.Canceled, err)
	}
	if spec.RootFS.Upper != "" {
		return h, errs.New(errs.Unimplemented, "microvm: template builds do not run in guests yet")
	}
	if err := d.packInitramfs(); err != nil {
		return h, err
	}
	if d.binds != nil { // the images chosen stay until the record names them
		d.binds.use.RLock()
		defer d.binds.use.RUnlock()
	}
	var shares []HostShare
	for _, b := range spec.RootFS.Binds {
		sh := HostShare{Source: b.Source, Target: b.Target, Writable: b.Writable}
		if d.binds != nil && !b.Writable {
			sh.Image = d.binds.image(b.Source)
		}
		shares = append(shares, sh)
	}
	images, err := d.layerImages(ctx, spec.RootFS.Layers, virtioTransports-fixedDevices-len(shares))
	if err != nil {
		return h, err
	}
	sandboxEnv, _ := json.Marshal(spec.Env)
	settings, _ := json.Marshal(spec.Agent)
	cpus := int(max(1, (spec.Limits.CPUMillis+999)/1000))
	vs := VMSpec{
		QEMU: d.cfg.QEMU, Virtiofsd: d.cfg.Virtiofsd,
		Machine: Machine{Kernel: d.kernel, Initrd: d.initrd, MemoryMB: spec.Limits.MemoryMB + guestOverheadMB, CPUs: cpus, KVM: d.kvm},
		Layers:  images, Shares: shares, NetNS: spec.NetNS,
		Guest: guest.Config{Hostname: id, DNS: spec.DNS, WritableDisk: true,
			MemoryMB: spec.Limits.MemoryMB, PIDs: spec.Limits.PIDs, Agent: inside.AgentPath,
			AgentEnv: []string{"PATH=" + guestPath, "HOME=/root",
				inside.EnvSandboxEnv + "=" + string(sandboxEnv), inside.EnvAgentSettings + "=" + string(settings)}},
	}
	if d.cfg.BootSnapshots && !slices.ContainsFunc(shares, func(sh HostShare) bool { return sh.Image == "" }) {
		snap, err := d.bootSnapshot(ctx, vs, spec.Limits.WritableBytes())
		if err != nil {
			return h, err
		}
		return d.createFromSnapshot(ctx, id, spec, snap)
	}
	// The host's share of the guest: its memory (the limit, the guest's
	// kernel and init), QEMU's own and the virtiofsds', their threads.
	dir, cg, undo, err := d.prepare(id, spec.Limits.CPUMillis, spec.Limits.MemoryMB+guestOverheadMB)
	if err != nil {
		return h, err
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	vs.Dir, vs.Cgroup, vs.Machine.Writable = dir, cg, filepath.Join(dir, writableImage)
	if err = MakeWritableImage(ctx, vs.Machine.Writable, spec.Limits.WritableBytes()); err != nil {
		return h, err
	}
	vm, err := Start(ctx, vs)
	if err == nil {
		// Recorded at once: what a node that lost the VM (a restart, even
		// during the boot) must find or end of it.
		rec := vm.Record()
		rec.Cgroup, rec.Limits = cg.Name(), spec.Limits
		rec.Machine, rec.Layers, rec.Shares, rec.Guest = vs.Machine, vs.Layers, vs.Shares, vs.Guest
		err = fsutil.WriteJSON(filepath.Join(dir, recordFile), rec)
		if err == nil {
			if err = waitAgent(ctx, vm); err != nil {
				err = fmt.Errorf("%w; the guest's console ends: %s", err, lastLines(vm.Console(), 5))
			} else {
				err = vm.SetClock(ctx)
			}
		}
		if err != nil {
			_ = vm.Stop()
		}
		qemu := rec.Processes[0]
		h = isolation.Handle{ID: id, Driver: d.Name(), PID: qemu.PID, StartTime: qemu.StartTime, CreatedAt: time.Now().UTC()}
	}
	if err != nil {
		return isolation.Handle{}, err
	}
	d.mu.Lock()
	d.vms[id] = &sandboxVM{vm: vm, cg: cg, limits: spec.Limits, shares: shares}
	d.mu.Unlock()
	return h, nil
}

// prepare reserves sandbox id and makes its directory and its cgroup, of
// cpuMillis and a machine of machineMB plus QEMU's own memory; undo
// removes them all.
func (d *Driver) prepare(id string, cpuMillis, machineMB int64) (dir string, cg *cgroups.Group, undo func(), err error) {
	d.mu.Lock()
	if _, ok := d.vms[id]; ok {
		d.mu.Unlock()
		return "", nil, nil, errs.New(errs.AlreadyExists, "sandbox %s exists", id)
	}
	d.vms[id] = &sandboxVM{} // reserved
	d.mu.Unlock()
	unreserve := func() {
		d.mu.Lock()
		delete(d.vms, id)
		d.mu.Unlock()
	}
	dir = d.dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		unreserve()
		return "", nil, nil, err
	}
	removeDir := func() {
		if err := fsutil.RemoveTree(dir); err != nil {
			d.cfg.Log.Error("remove a failed guest's directory", logx.SandboxID(id), logx.Err(err))
		}
		unreserve()
	}
	cg, err = cgroups.New(d.cgroupName(id), cgroups.Limits{
		CPUMillis: cpuMillis, MemoryBytes: (machineMB + vmmOverheadMB(d.kvm)) << 20, PIDs: vmmPIDs, IOWeight: 100,
	})
	if err != nil {
		removeDir()
		return "", nil, nil, err
	}
	return dir, cg, func() {
		if err := cg.Destroy(context.Background()); err != nil {
			d.cfg.Log.Error("remove a failed guest's cgroup", logx.SandboxID(id), logx.Err(err))
		}
		removeDir()
	}, nil
}

// waitAgent waits until the guest's agent answers, the guest stops or
// ctx ends. Each try gives up soon (firstTry, doubled after each try
// that timed out, up to lastTry) and the next sends a new SYN: the
// kernel would resend an unanswered one only after a second. The SYN
// to a guest whose MAC the node does not know yet waits for it, which
// the guest announces as its eth0 comes up (guest: arp_notify); the
// node itself would ask again only every second. Measured under TCG,
// 8 creates each: a median of 3.58 s with the tries of 2 s and no
// announcement (a try timed out, the next was refused a second later,
// then the agent answered), 3.25 s with both.
func waitAgent(ctx context.Context, vm *VM) error {
	// A guest whose agent never answers fails the create with its console
	// instead of holding it (and the caller) for good.
	ctx, cancel := context.WithTimeoutCause(ctx, agentDeadline, fmt.Errorf("the guest's agent did not answer within %v", agentDeadline))
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return vm.Dial(ctx, agentPort)
	}}}
	defer client.CloseIdleConnections()
	try := firstTry
	for {
		tctx, cancel := context.WithTimeout(ctx, try)
		req, _ := http.NewRequestWithContext(tctx, http.MethodGet, "http://agent/health", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusNoContent {
			return nil
		}
		pause := 100 * time.Millisecond
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			try, pause = min(2*try, lastTry), 0 // no answer: a new SYN at once
		}
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(ctx.Err(), context.DeadlineExceeded) && cause != nil {
				return errs.Mark(errs.Unavailable, cause)
			}
			return errs.Mark(errs.Canceled, ctx.Err())
		case <-vm.Done():
			return errors.New("the guest stopped before its agent answered")
		case <-time.After(pause):
		}
	}
}

// The bounds of a try of waitAgent, and of the whole wait (a booted guest
// answers in about 4 s under TCG on 2 cores).
const (
	firstTry      = 100 * time.Millisecond
	lastTry       = 2 * time.Second
	agentDeadline = 3 * time.Minute
)

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

func (d *Driver) get(id string) *sandboxVM {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.vms[id]; s != nil && s.vm != nil {
		return s
	}
	return nil
}

// Dial implements isolation.Driver.
func (d *Driver) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	s := d.get(id)
	if s == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	vm := s.vm
	select {
	case <-vm.Done():
		return nil, errs.New(errs.NotFound, "sandbox %s has ended", id)
	default:
	}
	return vm.Dial(ctx, port)
}

// Wait implements isolation.Driver: a guest that stopped on its own (its
// agent ended: the init powers the machine off and QEMU exits) crashed.
func (d *Driver) Wait(ctx context.Context, id string) (isolation.Exit, error) {
	s := d.get(id)
	if s == nil {
		return isolation.Exit{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	select {
	case <-ctx.Done():
		return isolation.Exit{}, errs.Mark(errs.Canceled, ctx.Err())
	case <-s.vm.Done():
	}
	d.mu.Lock()
	destroyed, checkpointed := s.destroyed, s.checkpointed
	d.mu.Unlock()
	switch {
	case destroyed:
		return isolation.Exit{Reason: isolation.ExitDestroyed}, nil
	case checkpointed:
		return isolation.Exit{Reason: isolation.ExitCheckpointed}, nil
	}
	if n, err := s.cg.OOMKills(); err == nil && n > 0 { // the host killed QEMU for memory
		return isolation.Exit{Reason: isolation.ExitOOM, Detail: "the guest's memory outgrew its cgroup"}, nil
	}
	return isolation.Exit{Reason: isolation.ExitCrashed, Detail: lastLines(s.vm.Console(), 3)}, nil
}

// Destroy implements isolation.Driver.
func (d *Driver) Destroy(ctx context.Context, id string) error {
	if err := isolation.ValidateID(id); err != nil {
		return err
	}
	d.mu.Lock()
	s := d.vms[id]
	if s != nil {
		s.destroyed = true
	}
	if ns := d.held[id]; ns != nil {
		ns.Close()
		delete(d.held, id)
	}
	d.mu.Unlock()
	if s != nil && s.vm != nil {
		if err := s.vm.Stop(); err != nil {
			return fmt.Errorf("stop sandbox %s: %w", id, err)
		}
	} else if s == nil { // what a VM this driver does not hold left (a restart)
		vm, _, err := Adopt(d.dir(id))
		if err == nil {
			err = vm.Stop()
		} else if errors.Is(err, os.ErrNotExist) {
			err = nil // no record: nothing ran
		}
		if err != nil {
			return fmt.Errorf("remove what sandbox %s left: %w", id, err)
		}
	}
	if cg, err := cgroups.Load(d.cgroupName(id)); err == nil {
		if err := cg.Destroy(ctx); err != nil {
			return fmt.Errorf("remove sandbox %s: %w", id, err)
		}
	}
	if err := fsutil.RemoveTree(d.dir(id)); err != nil {
		return fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	if s != nil && s.vm != nil {
		d.mu.Lock()
		delete(d.vms, id)
		d.mu.Unlock()
	}
	return nil
}

// Recover implements isolation.Driver: a guest outlives its node, which
// adopts it again after a restart (its processes, namespace and console).
func (d *Driver) Recover(ctx context.Context, h isolation.Handle) error {
	if err := isolation.ValidateID(h.ID); err != nil {
		return err
	}
	vm, rec, err := Adopt(d.dir(h.ID))
	if errors.Is(err, os.ErrNotExist) {
		return errs.New(errs.NotFound, "sandbox %s: no guest recorded", h.ID)
	}
	if err != nil {
		return fmt.Errorf("recover sandbox %s: %w", h.ID, err)
	}
	select {
	case <-vm.Done():
		vm.Stop()
		return errs.New(errs.NotFound, "sandbox %s: its guest has stopped", h.ID)
	default:
	}
	if q := rec.Processes[0]; q.PID != h.PID || q.StartTime != h.StartTime {
		vm.closeFiles()
		return errs.New(errs.NotFound, "sandbox %s: its guest is not the one the handle names", h.ID)
	}
	cg, err := cgroups.Load(rec.Cgroup)
	if err != nil {
		vm.closeFiles()
		return fmt.Errorf("recover sandbox %s: %w", h.ID, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.vms[h.ID]; ok {
		vm.closeFiles()
		return errs.New(errs.AlreadyExists, "sandbox %s is already held", h.ID)
	}
	d.vms[h.ID] = &sandboxVM{vm: vm, cg: cg, limits: rec.Limits, shares: rec.Shares}
	return nil
}

// Stats implements isolation.Stater: the host's view (the guest's memory
// as QEMU touched it, QEMU's CPU time, the writable disk's blocks).
func (d *Driver) Stats(ctx context.Context, id string) (isolation.Stats, error) {
	s := d.get(id)
	if s == nil {
		return isolation.Stats{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	st, err := hostproc.Stats(s.cg, s.limits, "")
	if err != nil {
		return isolation.Stats{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	var img unix.Stat_t // the writable disk's blocks the guest wrote
	if err := unix.Stat(filepath.Join(d.dir(id), writableImage), &img); err == nil {
		st.DiskUsed = uint64(img.Blocks) * 512
	}
	return st, nil
}

// AgentLog implements isolation.AgentLogger: the agent's JSON lines from
// the guest's console log (where the kernel and the init write too).
func (d *Driver) AgentLog(_ context.Context, id string, max int64) ([]byte, error) {
	if err := isolation.ValidateID(id); err != nil {
		return nil, err
	}
	b, err := hostproc.LogTail(filepath.Join(d.dir(id), consoleLog), max)
	if err != nil {
		return nil, err
	}
	var out []byte
	for line := range bytes.Lines(b) {
		if bytes.HasPrefix(line, []byte("{")) {
			out = append(out, line...)
		}
	}
	return out, nil
}

// List implements isolation.Lister.
func (d *Driver) List(ctx context.Context) ([]string, error) { return hostproc.SandboxIDs(d.cfg.Dir) }
