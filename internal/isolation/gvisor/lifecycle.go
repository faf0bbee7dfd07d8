package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/logx"
)

// Wait implements isolation.Driver.
func (d *Driver) Wait(ctx context.Context, id string) (isolation.Exit, error) {
	sb := d.get(id)
	if sb == nil {
		return isolation.Exit{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return sb.end.Wait(ctx)
}

// Destroy implements isolation.Driver: runsc ends the sandbox (its gVisor
// kernel, gofer and every process), then the cgroup, the mounts and the
// directory go. Safe on leftovers of a sandbox the node no longer knows,
// and twice.
func (d *Driver) Destroy(ctx context.Context, id string) error {
	if err := isolation.ValidateID(id); err != nil {
		return err
	}
	group := d.cgroupName(id)
	var h isolation.Handle
	sb := d.get(id)
	if sb != nil {
		sb.destroying.Store(true)
		h, group = sb.handle, sb.cg.Name()
	} else if st, err := hostproc.ReadRecord(d.dir(id)); err == nil {
		h, group = st.Handle, st.Cgroup
	}
	if err := d.remove(ctx, id, group, h); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	if sb != nil {
		if _, err := sb.end.Wait(ctx); err != nil {
			return fmt.Errorf("destroy %s: %w", id, err)
		}
	}
	d.mu.Lock()
	delete(d.sandboxes, id)
	if ns := d.saved[id]; ns != nil {
		ns.Close()
		delete(d.saved, id)
	}
	d.mu.Unlock()
	return nil
}

// remove takes down whatever exists of sandbox id: runsc's container, the
// sandbox's host processes (h, when known), its cgroup, its mounts and its
// directory.
func (d *Driver) remove(ctx context.Context, id, group string, h isolation.Handle) error {
	if _, err := os.Stat(filepath.Join(d.cfg.Dir, runscState, id)); err == nil || h.PID > 0 {
		_, _ = d.runsc(ctx, "kill", "--all", id, "KILL")
		if _, err := d.runsc(ctx, "delete", "--force", id); err != nil && !strings.Contains(err.Error(), "does not exist") {
			d.log.Warn("runsc delete", logx.SandboxID(id), logx.Err(err))
		}
	}
	if h.PID > 0 {
		_ = hostproc.Kill(h)
		if err := hostproc.WaitGone(ctx, h); err != nil {
			return err
		}
	}
	if cg, err := cgroups.Load(group); err == nil {
		if err := cg.Destroy(ctx); err != nil {
			return err
		}
	}
	if err := cgroups.RemoveEverywhere(group); err != nil {
		return err
	}
	dir := d.dir(id)
	for _, m := range []string{filepath.Join(dir, "tmp"), filepath.Join(dir, "rootfs"), filepath.Join(dir, "rw")} {
		if err := unmount(ctx, m); err != nil {
			return err
		}
	}
	// What runsc left of its own state, if delete could not run.
	if err := fsutil.RemoveTree(filepath.Join(d.cfg.Dir, runscState, id)); err != nil {
		return err
	}
	return fsutil.RemoveTree(dir)
}

// unmount unmounts path if something is mounted there, waiting out a
// mount still busy for a moment after the gofer ended.
func unmount(ctx context.Context, path string) error {
	for {
		err := unix.Unmount(path, 0)
		switch {
		case err == nil:
			continue // a mount under it, stacked: unmount again
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		case errors.Is(err, unix.EBUSY):
			select {
			case <-ctx.Done():
				return fmt.Errorf("unmount %s: %w", path, err)
			case <-time.After(5 * time.Millisecond):
			}
		default:
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
}

// Recover implements isolation.Driver: re-adopt a sandbox whose runsc
// process is still the one the handle names.
func (d *Driver) Recover(ctx context.Context, h isolation.Handle) error {
	if err := isolation.ValidateID(h.ID); err != nil {
		return err
	}
	if d.get(h.ID) != nil {
		return nil
	}
	if err := d.waitOrphans(ctx, h.ID); err != nil {
		return err
	}
	st, err := hostproc.ReadRecord(d.dir(h.ID))
	if err != nil {
		return errs.New(errs.NotFound, "sandbox %s has no state: %v", h.ID, err)
	}
	if st.Handle.PID != h.PID || st.Handle.StartTime != h.StartTime {
		return errs.New(errs.NotFound, "sandbox %s: handle does not match its state", h.ID)
	}
	pidfd, err := unix.PidfdOpen(h.PID, 0)
	if err != nil || !hostproc.Alive(h) {
		if err == nil {
			unix.Close(pidfd)
		}
		return errs.New(errs.NotFound, "sandbox %s: its gVisor kernel is gone", h.ID)
	}
	cg, err := cgroups.Load(st.Cgroup)
	if err != nil {
		unix.Close(pidfd)
		return errs.New(errs.NotFound, "sandbox %s: %v", h.ID, err)
	}
	sb := &sandbox{id: h.ID, handle: h, cg: cg, limits: st.Limits, end: hostproc.NewEnd()}
	d.mu.Lock()
	d.sandboxes[h.ID] = sb
	d.mu.Unlock()
	go d.watch(sb, pidfd)
	d.log.Info("sandbox recovered", logx.SandboxID(h.ID), logx.PID(h.PID))
	return nil
}

// List implements isolation.Lister: every sandbox with a directory here.
func (d *Driver) List(ctx context.Context) ([]string, error) {
	return hostproc.SandboxIDs(d.cfg.Dir)
}

// Stats implements isolation.Stater, from the sandbox's cgroup (the
// sentry's memory is the sandbox's).
func (d *Driver) Stats(ctx context.Context, id string) (isolation.Stats, error) {
	sb := d.get(id)
	if sb == nil {
		return isolation.Stats{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.limMu.Lock()
	limits := sb.limits
	sb.limMu.Unlock()
	s, err := hostproc.Stats(sb.cg, limits, filepath.Join(d.dir(id), "rw"))
	if err != nil {
		return isolation.Stats{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	return s, nil
}

// Pause implements isolation.Pauser: runsc stops the sandbox's kernel in
// place (its memory stays).
func (d *Driver) Pause(ctx context.Context, id string) error {
	if d.get(id) == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	_, err := d.runsc(ctx, "pause", id)
	return err
}

// Resume implements isolation.Pauser.
func (d *Driver) Resume(ctx context.Context, id string) error {
	if d.get(id) == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	_, err := d.runsc(ctx, "resume", id)
	return err
}

// AgentLog implements isolation.AgentLogger.
func (d *Driver) AgentLog(_ context.Context, id string, max int64) ([]byte, error) {
	if err := isolation.ValidateID(id); err != nil {
		return nil, err
	}
	return hostproc.LogTail(filepath.Join(d.dir(id), "agent.log"), max)
}
