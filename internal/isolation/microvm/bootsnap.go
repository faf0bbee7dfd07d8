package microvm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/inside"
)

// A boot snapshot is a guest booted once for a template and its limits,
// and saved as soon as its agent answered: its memory is a file the guest
// wrote through (Machine.MemoryShared), so the save holds its devices'
// state alone. A later create of that template and those limits starts
// from it instead of booting (BootSnapshots): a new QEMU maps the file
// copy-on-write, so that every such guest shares the pages it has not
// written, reads the devices' state and goes on; the driver then gives the
// guest its name, address, clock, a random seed of its own, and its
// agent its token and variables.
//
// Snapshots live in snapshotsDir, one directory each, laid out as a
// fork's image (sourceRecord, memoryImage, writableCopy) plus the memory
// file and the agent's token. They are a cache: the driver removes them
// at its start (its initramfs is packed anew then).
const (
	snapshotsDir   = "_snapshots"
	bootPrefix     = "_boot-" // a snapshot's guest's directory in the driver's
	snapshotMemory = "memory"
	snapshotToken  = "token"
)

// snapshotKey names the snapshot of what a guest boots on: the machine,
// its disks and the guest's settings, but for what each guest gets of
// its own (its name, and its agent's token and variables).
func snapshotKey(vs VMSpec, diskBytes int64) string {
	g := vs.Guest
	g.Hostname, g.AgentEnv = "", nil
	b, _ := json.Marshal(struct {
		Machine   Machine
		Layers    []string
		Shares    []HostShare
		Guest     any
		DiskBytes int64
	}{vs.Machine, vs.Layers, vs.Shares, g, diskBytes})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// bootSnapshot returns the directory of the snapshot of vs (a guest with
// a writable disk of diskBytes), booting and saving it first when there
// is none. One guest boots per snapshot: a create that needs a snapshot
// being made waits for it (and makes it itself if that make failed);
// creates of other snapshots go on.
func (d *Driver) bootSnapshot(ctx context.Context, vs VMSpec, diskBytes int64) (string, error) {
	vs.Machine.NoPageReporting = true
	key := snapshotKey(vs, diskBytes)
	dir := filepath.Join(d.cfg.Dir, snapshotsDir, key)
	for {
		d.snapMu.Lock()
		if _, err := os.Stat(filepath.Join(dir, snapshotToken)); err == nil {
			now := time.Now()
			err := os.Chtimes(dir, now, now) // the last use, for evictSnapshots
			d.snapMu.Unlock()
			return dir, err
		}
		making := d.snapMaking[key]
		if making == nil {
			break // snapMu held
		}
		d.snapMu.Unlock()
		select {
		case <-making:
		case <-ctx.Done():
			return "", errs.Mark(errs.Canceled, ctx.Err())
		}
	}
	made := make(chan struct{})
	d.snapMaking[key] = made
	d.snapMu.Unlock()
	err := d.makeBootSnapshot(ctx, key, vs, diskBytes)
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	delete(d.snapMaking, key)
	close(made)
	if err != nil {
		return "", fmt.Errorf("the template's boot snapshot: %w", err)
	}
	return dir, d.evictSnapshots(maxSnapshots)
}

// maxSnapshots is how many boot snapshots a driver keeps: each holds the
// memory its guest touched while it booted (about 130 MiB under TCG, on
// disk and in the page cache).
const maxSnapshots = 16

// evictSnapshots removes the least recently used snapshots past keep
// (snapMu held). Guests started from one keep its memory mapped.
func (d *Driver) evictSnapshots(keep int) error {
	entries, err := os.ReadDir(filepath.Join(d.cfg.Dir, snapshotsDir))
	if err != nil {
		return err
	}
	type snap struct {
		dir  string
		used time.Time
	}
	var snaps []snap
	for _, e := range entries {
		if info, err := e.Info(); err == nil && e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			snaps = append(snaps, snap{filepath.Join(d.cfg.Dir, snapshotsDir, e.Name()), info.ModTime()})
		}
	}
	slices.SortFunc(snaps, func(a, b snap) int { return b.used.Compare(a.used) })
	d.snapUse.Lock() // no guest starts from one meanwhile
	defer d.snapUse.Unlock()
	for _, s := range snaps[min(keep, len(snaps)):] {
		if err := fsutil.RemoveTree(s.dir); err != nil {
			return err
		}
	}
	return nil
}

// makeBootSnapshot boots vs with its memory in a file, waits for its
// agent and saves the machine (its devices alone), in snapshotsDir/key,
// which appears whole or not at all. The guest runs in a cgroup of its
// own, in a network namespace of its own, and ends with the save.
func (d *Driver) makeBootSnapshot(ctx context.Context, key string, vs VMSpec, diskBytes int64) (err error) {
	final := filepath.Join(d.cfg.Dir, snapshotsDir, key)
	tmp := final + ".tmp"
	// The guest's own directory is short (its sockets' paths are
	// limited) and, like a sandbox's, holds its record until it ends.
	vmDir := filepath.Join(d.cfg.Dir, bootPrefix+key[:16])
	for _, dir := range []string{tmp, vmDir} {
		if err := fsutil.RemoveTree(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	defer func() {
		err = errors.Join(err, fsutil.RemoveTree(vmDir))
		if err != nil {
			err = errors.Join(err, fsutil.RemoveTree(tmp))
		}
	}()
	cg, err := cgroups.New(d.cgroupName("_snapshot-"+key), cgroups.Limits{
		CPUMillis: int64(vs.Machine.CPUs) * 1000, MemoryBytes: (vs.Machine.MemoryMB + vmmOverheadMB(d.kvm)) << 20, PIDs: vmmPIDs, IOWeight: 100,
	})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cg.Destroy(context.Background()); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	tokenBytes := make([]byte, 32)
	if _, err := rand.Read(tokenBytes); err != nil {
		return err
	}
	token := hex.EncodeToString(tokenBytes)
	settings, _ := json.Marshal(isolation.AgentSettings{AccessToken: token})
	vs.Dir, vs.Cgroup, vs.NetNS, vs.Incoming = vmDir, cg, nil, nil
	vs.Machine.Writable = filepath.Join(tmp, writableCopy)
	vs.Machine.MemoryFile, vs.Machine.MemoryShared = filepath.Join(tmp, snapshotMemory), true
	vs.Guest.Hostname = "snapshot"
	vs.Guest.AgentEnv = []string{"PATH=" + guestPath, "HOME=/root",
		inside.EnvSandboxEnv + "={}", inside.EnvAgentSettings + "=" + string(settings)}
	if err := MakeWritableImage(ctx, vs.Machine.Writable, diskBytes); err != nil {
		return err
	}
	vm, err := Start(ctx, vs)
	if err != nil {
		return err
	}
	defer vm.Stop()
	rec := vm.Record()
	rec.Cgroup = cg.Name()
	if err := fsutil.WriteJSON(filepath.Join(vmDir, recordFile), rec); err != nil {
		return err
	}
	if err := waitAgent(ctx, vm); err != nil {
		return fmt.Errorf("%w; the guest's console ends: %s", err, lastLines(vm.Console(), 5))
	}
	img, err := os.OpenFile(filepath.Join(tmp, memoryImage), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer img.Close()
	m, err := connectMonitor(ctx, vmDir)
	if err != nil {
		return err
	}
	err = saveMachine(ctx, m, img, true)
	m.Disconnect()
	if err == nil {
		err = img.Sync()
	}
	if err != nil {
		return err
	}
	if err := vm.Stop(); err != nil {
		return err
	}
	// The record a clone reads: the file's final path, mapped
	// copy-on-write.
	rec = Record{Machine: vs.Machine, Layers: vs.Layers, Shares: vs.Shares, Guest: vs.Guest}
	rec.Machine.MemoryFile, rec.Machine.MemoryShared = filepath.Join(final, snapshotMemory), false
	rec.Machine.Writable = ""
	if err := os.Chmod(filepath.Join(tmp, snapshotMemory), 0o600); err != nil {
		return err
	}
	if err := fsutil.WriteJSON(filepath.Join(tmp, sourceRecord), rec); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, snapshotToken), []byte(token), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, final)
}

// createFromSnapshot starts sandbox id from the boot snapshot in snap and
// gives its agent spec's settings, which the snapshot's agent did not
// have.
func (d *Driver) createFromSnapshot(ctx context.Context, id string, spec isolation.Spec, snap string) (h isolation.Handle, err error) {
	d.snapUse.RLock() // until its QEMU has the snapshot's files open
	token, err := os.ReadFile(filepath.Join(snap, snapshotToken))
	if err == nil {
		h, err = d.clone(ctx, id, spec, snap, true)
	}
	d.snapUse.RUnlock()
	if err != nil {
		return h, err
	}
	defer func() {
		if err != nil {
			_ = d.Destroy(context.WithoutCancel(ctx), id)
			h = isolation.Handle{}
		}
	}()
	agent := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, agentPort) })
	defer agent.Close()
	agent.SetToken(string(token))
	vars := maps.Clone(spec.Agent.EnvVars)
	if vars == nil {
		vars = map[string]string{}
	}
	maps.Copy(vars, spec.Env)
	workdir := spec.Agent.DefaultWorkdir
	if err := agent.Init(ctx, envd.InitRequest{EnvVars: vars, AccessToken: &spec.Agent.AccessToken,
		DefaultUser: spec.Agent.DefaultUser, DefaultWorkdir: &workdir, NewBoot: true}); err != nil {
		return h, fmt.Errorf("the agent of a guest from a boot snapshot: %w", err)
	}
	return h, nil
}

// removeSnapshots removes the boot snapshots and what a stopped node left
// of a snapshot's guest: its QEMU, cgroup and directory (the driver's
// start: the snapshots are of the last start's initramfs).
func (d *Driver) removeSnapshots() error {
	left, _ := filepath.Glob(filepath.Join(d.cfg.Dir, bootPrefix+"*"))
	for _, dir := range left {
		vm, rec, err := Adopt(dir)
		if err == nil {
			err = vm.Stop()
		} else if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err == nil && rec.Cgroup != "" {
			if cg, lerr := cgroups.Load(rec.Cgroup); lerr == nil {
				err = cg.Destroy(context.Background())
			}
		}
		if err == nil {
			err = fsutil.RemoveTree(dir)
		}
		if err != nil {
			return fmt.Errorf("what a boot snapshot's guest left: %w", err)
		}
	}
	return fsutil.RemoveTree(filepath.Join(d.cfg.Dir, snapshotsDir))
}
