package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
)

var _ isolation.Checkpointer = (*Driver)(nil)

// memoryImage is the machine's saved state in a checkpoint's directory:
// QEMU's migration stream (its memory and devices).
const memoryImage = "machine"

// Checkpoint implements isolation.Checkpointer: QEMU writes the stopped
// machine (its memory and devices' state) to dir, and the guest ends. Its
// writable disk, record and cgroup stay for Restore, and so does the
// pool's namespace it ran in while the node holds it. A guest that shares
// host directories (the base template's binds, volumes) cannot be saved:
// QEMU refuses to migrate a machine with virtiofs devices.
func (d *Driver) Checkpoint(ctx context.Context, id, dir string) error {
	s, err := d.saveGuest(ctx, id, dir, false, nil)
	if err != nil {
		return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	// Saved: the guest ends here. The pool's namespace is held for the
	// restore (the VM's own goes with it).
	var held *os.File
	if s.vm.pool != nil {
		fd, err := unix.FcntlInt(s.vm.nsFile.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return err
		}
		held = os.NewFile(uintptr(fd), "held-netns")
	}
	d.mu.Lock()
	s.checkpointed = true
	if held != nil {
		d.held[id] = held
	}
	d.mu.Unlock()
	return s.vm.Stop()
}

// saveGuest has QEMU write sandbox id's machine, stopped, to dir
// (memoryImage), then calls then (unless nil) while it is still stopped.
// A guest that ran runs again when either fails, and after then when
// goOn. A guest that shares host directories cannot be saved
// (Unimplemented).
func (d *Driver) saveGuest(ctx context.Context, id, dir string, goOn bool, then func() error) (*sandboxVM, error) {
	s := d.get(id)
	if s == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if len(s.vm.fsds) > 0 {
		return nil, errs.New(errs.Unimplemented, "microvm: sandbox %s shares host directories with its guest (a template's binds, volumes), which QEMU cannot save", id)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	img, err := os.OpenFile(filepath.Join(dir, memoryImage), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	m, err := connectMonitor(ctx, d.dir(id))
	if err != nil {
		return nil, fmt.Errorf("the monitor: %w", err)
	}
	defer m.Disconnect()
	raw, err := runQMP(m, "query-status", nil, nil)
	if err != nil {
		return nil, err
	}
	before, err := parseStatus(raw)
	if err != nil {
		return nil, err
	}
	// An earlier save of a paused guest (a fork's Image) left its machine
	// migrated, its disks given up (QEMU's postmigrate state), which QEMU
	// does not migrate again before it has run: it runs from this cont to
	// saveMachine's stop, the next command.
	if before.Status == "postmigrate" {
		if _, err := runQMP(m, "cont", nil, nil); err != nil {
			return nil, err
		}
	}
	err = saveMachine(ctx, m, img, false)
	if err != nil {
		err = fmt.Errorf("%w; QEMU's output ends: %s", err, lastLines(s.vm.Console(), 3))
	} else {
		err = img.Sync()
	}
	if err == nil && then != nil {
		err = then()
	}
	if before.Running && (err != nil || goOn) {
		if _, cerr := runQMP(m, "cont", nil, nil); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// saveMachine stops the machine and has QEMU write it to img, then waits
// until it has; with devicesOnly, the memory, which is a file of its own
// (a boot snapshot's), is left out.
func saveMachine(ctx context.Context, m *qmp.SocketMonitor, img *os.File, devicesOnly bool) error {
	if _, err := runQMP(m, "stop", nil, nil); err != nil {
		return err
	}
	// Set either way: a guest started from a boot snapshot read its
	// machine with it on, and saves all its memory.
	if err := ignoreSharedMemory(m, devicesOnly); err != nil {
		return err
	}
	// QEMU's default bandwidth of a migration is 32 MiB/s: a file takes
	// what the disk gives.
	if _, err := runQMP(m, "migrate-set-parameters", map[string]any{"max-bandwidth": int64(1) << 40}, nil); err != nil {
		return err
	}
	if _, err := runQMP(m, "getfd", map[string]any{"fdname": "checkpoint"}, img); err != nil {
		return err
	}
	if _, err := runQMP(m, "migrate", map[string]any{"uri": "fd:checkpoint"}, nil); err != nil {
		return err
	}
	for {
		raw, err := runQMP(m, "query-migrate", nil, nil)
		if err != nil {
			return err
		}
		var st struct {
			Return struct {
				Status    string `json:"status"`
				ErrorDesc string `json:"error-desc"`
			} `json:"return"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("query-migrate: %w", err)
		}
		switch st.Return.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("QEMU's save of the machine %s: %s", st.Return.Status, st.Return.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			_, _ = runQMP(m, "migrate_cancel", nil, nil)
			return errs.Mark(errs.Canceled, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Restore implements isolation.Checkpointer: a new QEMU runs the machine
// saved in dir, on the same disks, in netns (else the namespace held
// since the checkpoint, else one of its own with no way out). A guest
// that comes back at another of the pool's addresses moves to it; its
// clock is set to the host's.
func (d *Driver) Restore(ctx context.Context, id, dir string, netns *os.File) (h isolation.Handle, err error) {
	if err := isolation.ValidateID(id); err != nil {
		return h, err
	}
	d.mu.Lock()
	if s := d.vms[id]; s != nil && !s.checkpointed {
		d.mu.Unlock()
		return h, errs.New(errs.Conflict, "sandbox %s runs", id)
	}
	held := d.held[id]
	d.mu.Unlock()
	if netns == nil {
		netns = held
	}
	vmDir := d.dir(id)
	rec, err := readRecordFile(filepath.Join(vmDir, recordFile))
	if errors.Is(err, os.ErrNotExist) {
		return h, errs.New(errs.NotFound, "sandbox %s: %v", id, err)
	}
	if err != nil {
		return h, fmt.Errorf("sandbox %s: %w", id, err)
	}
	if err := checkSavedShares(filepath.Join(d.cfg.Dir, imagesDir), rec.Shares); err != nil {
		return h, err
	}
	if err := d.packInitramfs(); err != nil { // a node that restarted has not yet
		return h, err
	}
	img, err := os.Open(filepath.Join(dir, memoryImage))
	if err != nil {
		return h, err
	}
	defer img.Close()
	cg, err := cgroups.Load(rec.Cgroup)
	if err != nil {
		return h, fmt.Errorf("sandbox %s: %w", id, err)
	}
	// What the last QEMU left: its sockets and jail are made anew.
	for _, name := range []string{consoleSocket, qmpSocket, "jail"} {
		if err := os.Remove(filepath.Join(vmDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return h, err
		}
	}
	vm, err := Start(ctx, VMSpec{
		Dir: vmDir, QEMU: d.cfg.QEMU, Virtiofsd: d.cfg.Virtiofsd, Machine: rec.Machine.plainMemory(),
		Layers: rec.Layers, Shares: rec.Shares, NetNS: netns, Cgroup: cg, Guest: rec.Guest, Incoming: img,
	})
	if err != nil {
		return h, fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			vm.Stop()
		}
	}()
	next := vm.Record()
	next.Cgroup, next.Limits, next.Machine, next.Layers, next.Shares, next.Guest = rec.Cgroup, rec.Limits, rec.Machine, rec.Layers, rec.Shares, rec.Guest
	if err := fsutil.WriteJSON(filepath.Join(vmDir, recordFile), next); err != nil {
		return h, err
	}
	if err := d.wake(ctx, vm, rec.Pool, ""); err != nil {
		return h, fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	d.mu.Lock()
	d.vms[id] = &sandboxVM{vm: vm, cg: cg, limits: rec.Limits, shares: rec.Shares}
	if held != nil {
		held.Close() // the guest holds its namespace
		delete(d.held, id)
	}
	d.mu.Unlock()
	q := next.Processes[0]
	return isolation.Handle{ID: id, Driver: d.Name(), PID: q.PID, StartTime: q.StartTime, CreatedAt: time.Now().UTC()}, nil
}

// wake runs a machine a new QEMU reads back (Restore, Clone) once it has
// read it: the guest goes on, its sandbox thawed (a machine saved while
// the init exported its files had it frozen), moves to its namespace's
// address when it had another (was), takes hostname when given, the
// host's clock and a seed of its own for its kernel's random numbers; it
// returns once the guest's agent answers.
func (d *Driver) wake(ctx context.Context, vm *VM, was *PoolAddress, hostname string) error {
	if err := waitIncoming(ctx, vm.dir, vm); err != nil {
		return fmt.Errorf("%w; the guest's console ends: %s", err, lastLines(vm.Console(), 5))
	}
	m, err := connectMonitor(ctx, vm.dir)
	if err != nil {
		return err
	}
	_, err = runQMP(m, "cont", nil, nil)
	m.Disconnect()
	if err != nil {
		return err
	}
	if err := vm.Thaw(ctx); err != nil { // saved during an export of its files
		return err
	}
	if vm.pool != nil && (was == nil || *was != *vm.pool) {
		if err := vm.SetAddress(ctx, *vm.pool); err != nil {
			return err
		}
	}
	if hostname != "" {
		if err := vm.SetHostname(ctx, hostname); err != nil {
			return err
		}
	}
	if err := vm.SetClock(ctx); err != nil {
		return err
	}
	// Copies of one machine part here. A guest saved by an older node
	// has an init that does not know the request, and goes on unseeded.
	if err := vm.Reseed(ctx); err != nil && !errors.Is(err, guest.ErrUnknownRequest) {
		return err
	}
	return waitAgent(ctx, vm)
}

// ignoreSharedMemory tells QEMU whether a guest's memory held in a file
// it writes through is part of a saved machine (migration's
// x-ignore-shared on: it is not): a save leaves it out, and a read
// expects it not.
func ignoreSharedMemory(m *qmp.SocketMonitor, on bool) error {
	_, err := runQMP(m, "migrate-set-capabilities", map[string]any{
		"capabilities": []any{map[string]any{"capability": "x-ignore-shared", "state": on}}}, nil)
	return err
}

// waitIncoming waits until QEMU has read the saved machine (it is then
// stopped), or ended, or ctx ends; a read QEMU defers (a guest started
// from a boot snapshot) it starts first.
func waitIncoming(ctx context.Context, dir string, vm *VM) error {
	var m *qmp.SocketMonitor
	for deadline := time.Now().Add(10 * time.Second); ; { // QEMU makes its monitor's socket after the console's
		var err error
		if m, err = connectMonitor(ctx, dir); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errs.Mark(errs.Canceled, ctx.Err())
		case <-vm.Done():
			return errors.New("QEMU ended before its monitor answered")
		case <-time.After(10 * time.Millisecond):
		}
	}
	defer m.Disconnect()
	if vm.deferred != "" {
		if err := ignoreSharedMemory(m, true); err != nil {
			return err
		}
		if _, err := runQMP(m, "migrate-incoming", map[string]any{"uri": vm.deferred}, nil); err != nil {
			return err
		}
	}
	for {
		raw, err := runQMP(m, "query-status", nil, nil)
		if err != nil {
			return err
		}
		st, err := parseStatus(raw)
		if err != nil {
			return err
		}
		switch st.Status {
		case "inmigrate":
		case "paused", "prelaunch":
			return nil
		default:
			return fmt.Errorf("QEMU's state after reading the saved machine: %s", st.Status)
		}
		select {
		case <-ctx.Done():
			return errs.Mark(errs.Canceled, ctx.Err())
		case <-vm.Done():
			return errors.New("QEMU ended while reading the saved machine")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
