package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
)

// Checkpoint implements isolation.Checkpointer: runsc saves the sandbox's
// kernel — every process's memory and state — under dir and stops it. Its
// root file system, bundle, record and network namespace stay for Restore.
func (d *Driver) Checkpoint(ctx context.Context, id, dir string) error {
	sb := d.get(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The namespace outlives the sandbox's process only if held.
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", sb.handle.PID))
	if err != nil {
		return errs.Mark(errs.Unavailable, fmt.Errorf("sandbox %s: %w", id, err))
	}
	sb.checkpointed.Store(true)
	if _, err := d.runsc(ctx, "checkpoint", "--image-path", dir, id); err != nil {
		sb.checkpointed.Store(false)
		ns.Close()
		return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	if _, err := sb.end.Wait(ctx); err != nil {
		ns.Close()
		return err
	}
	d.mu.Lock()
	d.saved[id] = ns
	d.mu.Unlock()
	return nil
}

// Restore implements isolation.Checkpointer: the sandbox runs again from
// the image in dir, in its network namespace (netns, else the one held
// since the checkpoint, else a new one with loopback only), on its root
// file system, under the same id. It needs no state of the driver's that
// a restart loses: the bundle, record and mounts stay under its directory.
func (d *Driver) Restore(ctx context.Context, id, dir string, netns *os.File) (isolation.Handle, error) {
	d.mu.Lock()
	held := d.saved[id]
	d.mu.Unlock()
	ns := netns
	switch {
	case ns != nil:
	case held != nil:
		ns = held
	default: // the driver restarted since the checkpoint: a namespace of its own
		var err error
		if ns, err = loopbackOnly(); err != nil {
			return isolation.Handle{}, err
		}
		defer ns.Close() // the restored sandbox holds it
	}
	rec, err := hostproc.ReadRecord(d.dir(id))
	if err != nil {
		return isolation.Handle{}, errs.New(errs.NotFound, "sandbox %s: %v", id, err)
	}
	// runsc keeps a checkpointed container, stopped: it goes first (the
	// driver's group stays; the restore uses it again).
	if _, err := d.runsc(ctx, "delete", "--force", id); err != nil {
		return isolation.Handle{}, err
	}
	bundle, err := readBundle(d.dir(id))
	if err != nil {
		return isolation.Handle{}, err
	}
	setNetNS(bundle, fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd()))
	if err := writeBundle(d.dir(id), bundle); err != nil {
		return isolation.Handle{}, err
	}
	pidFile := filepath.Join(d.dir(id), "pid")
	_ = os.Remove(pidFile)
	if _, err := d.runscLogged(ctx, filepath.Join(d.dir(id), "agent.log"), "restore", "--image-path", dir, "--bundle", d.dir(id), "--pid-file", pidFile, "--detach", id); err != nil {
		return isolation.Handle{}, fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	d.mu.Lock()
	delete(d.saved, id)
	delete(d.sandboxes, id)
	d.mu.Unlock()
	if held != nil {
		held.Close() // the restored sandbox holds its namespace
	}
	cg, err := cgroups.Load(rec.Cgroup)
	if err != nil {
		return isolation.Handle{}, err
	}
	h, err := d.track(id, pidFile, cg, rec.Limits)
	if err != nil {
		return h, err
	}
	if err := d.waitReady(ctx, id); err != nil {
		return h, fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	return h, nil
}
