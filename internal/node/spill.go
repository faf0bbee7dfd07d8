package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// spillDir is where a sandbox's checkpoint image goes.
func (m *Manager) spillDir(id string) string { return filepath.Join(m.cfg.Dir, "saved", id) }

// scheduleSpill arms a paused sandbox's move to disk (sb.mu held), on a
// driver that can checkpoint and a node that spills.
func (m *Manager) scheduleSpill(sb *sandbox) {
	if m.cfg.SpillAfter <= 0 {
		return
	}
	if _, ok := sb.driver.(isolation.Checkpointer); !ok {
		return
	}
	id := sb.info.ID
	sb.spill = time.AfterFunc(m.cfg.SpillAfter, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		switch err := m.Spill(ctx, id); {
		case err == nil, errs.Is(err, errs.Conflict):
		case errs.Is(err, errs.Unimplemented): // this sandbox, on a driver that saves others
			m.log.Info("a paused sandbox's memory stays in memory", logx.SandboxID(id), logx.Err(err))
		default:
			m.log.Error("write a paused sandbox's memory to disk; it stays in memory", logx.SandboxID(id), logx.Err(err))
		}
	})
}

// Spill writes a sandbox paused with its memory to disk: the driver's
// checkpoint of its processes (Checkpointer) with a manifest of the
// image's files. It then holds no memory and no process until Resume
// restores it, also after a restart of the node. One not paused, or on
// disk already, is a Conflict.
func (m *Manager) Spill(ctx context.Context, id string) error {
	sb := m.lookup(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.info.Phase() != PhasePaused {
		return errs.New(errs.Conflict, "sandbox %s is not paused with its memory in it", id)
	}
	d := sb.driver
	cp, err := driverCan[isolation.Checkpointer](d, "write a sandbox's memory to disk")
	if err != nil {
		return err
	}
	p, err := driverCan[isolation.Pauser](d, "write a sandbox's memory to disk")
	if err != nil {
		return err
	}
	start := time.Now()
	dir := m.spillDir(id)
	if err := fsutil.RemoveTree(dir); err != nil { // a spill a crash cut short
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	// Recorded first, without a manifest: a node that stops during the
	// checkpoint finds out at its restart which way it went (adopt).
	if err := m.transition(sb, StatePaused, sb.info.Rest.Spilling(dir), nil, nil); err != nil {
		return err
	}
	undo := func() {
		if err := m.transitioned(sb, StatePaused, sb.info.Rest.Paused(), nil); err != nil {
			m.log.Error("record a sandbox whose checkpoint failed", logx.SandboxID(id), logx.Err(err))
		}
	}
	// The runtime checkpoints a running sandbox: thawed for that, then
	// stopped by the checkpoint itself.
	if err := p.Resume(ctx, id); err != nil {
		undo()
		return err
	}
	if err := cp.Checkpoint(ctx, id, dir); err != nil {
		if perr := p.Pause(context.WithoutCancel(ctx), id); perr != nil {
			m.log.Error("pause a sandbox again after a failed checkpoint", logx.SandboxID(id), logx.Err(perr))
		}
		fsutil.RemoveTree(dir)
		undo()
		return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	files, err := template.SumFiles(dir)
	if err == nil {
		err = m.transition(sb, StatePaused, sb.info.Rest.OnDisk(dir, files), nil, nil)
	}
	if err != nil {
		// The checkpoint stopped it: unrecorded, it would be lost at a
		// restart. It runs again from the image, paused (a restart that
		// finds it spilling and alive finds it so too); if it cannot, it
		// stays spilling, which a restart resolves from the image.
		if _, rerr := cp.Restore(context.WithoutCancel(ctx), id, dir, nil); rerr == nil {
			_ = p.Pause(context.WithoutCancel(ctx), id)
			m.watch(sb)
			undo()
		} else {
			m.log.Error("restore a sandbox whose spill was not recorded", logx.SandboxID(id), logx.Err(rerr))
		}
		return err
	}
	var bytes int64
	for _, f := range files {
		bytes += f.Size
	}
	m.log.Info("paused sandbox's memory written to disk", logx.SandboxID(id), "bytes", bytes, "took", time.Since(start))
	return nil
}

// restoreSpilled brings back a sandbox from its checkpoint (sb.mu held),
// ending timeout from now. The image is checked against its manifest
// first: damaged or incomplete, it is refused (DataLoss) and the sandbox
// stays paused on disk.
func (m *Manager) restoreSpilled(ctx context.Context, sb *sandbox, timeout time.Duration) error {
	id, sp := sb.info.ID, sb.info.Rest.Memory
	if err := template.VerifyFiles(sp.Dir, sp.Files); err != nil {
		m.log.Error("saved memory refused", logx.SandboxID(id), logx.Err(err))
		return err
	}
	cp, err := driverCan[isolation.Checkpointer](sb.driver, "restore a sandbox")
	if err != nil {
		return err
	}
	var netns *os.File
	if sb.net == nil && m.cfg.Networks != nil && sb.info.Network != nil {
		// The node restarted since the spill: a network anew.
		n, err := m.cfg.Networks.Acquire(ctx, sb.info.Network.Internet)
		if err != nil {
			return fmt.Errorf("network for sandbox %s: %w", id, err)
		}
		if err := applyRules(ctx, m.cfg.Networks, n, sb.info.Network, sb.info.Team, sb.info.ID); err != nil {
			m.cfg.Networks.Release(n)
			return err
		}
		sb.net, netns = n, n.NS
		sb.info.Network.Slot, sb.info.Network.Addr = n.Slot, n.Addr.String()
	}
	h, err := cp.Restore(ctx, id, sp.Dir, netns)
	if err != nil {
		return err
	}
	sb.timer.Reset(timeout)
	// A shared copy of its files is stale now.
	if err := m.transitioned(sb, StateRunning, Rest{}, func(i *Info) {
		i.Handle, i.EndAt = h, time.Now().UTC().Add(timeout)
	}); err != nil {
		m.log.Error("record a restored sandbox", logx.SandboxID(id), logx.Err(err))
	}
	if err := fsutil.RemoveTree(sp.Dir); err != nil {
		m.log.Error("remove a restored sandbox's image", logx.SandboxID(id), logx.Err(err))
	}
	m.watch(sb)
	m.log.Info("sandbox restored from disk", logx.SandboxID(id))
	return nil
}

// adoptSpilling settles a sandbox whose checkpoint a node's stop cut short
// (a record that names an image without its manifest): still running,
// it is paused again and kept in memory; ended, its image is complete
// (runsc ends the sandbox once the image is written) and is listed now.
// One whose checkpoint ended just before the driver looked is still
// alive, on its way out, and refuses the pause: it is awaited, and its
// image listed.
func (m *Manager) adoptSpilling(ctx context.Context, info Info) (Info, error) {
	d := m.recordDriver(info)
	if err := d.Recover(ctx, info.Handle); err == nil {
		if p, ok := d.(isolation.Pauser); ok {
			// Thawed for the checkpoint or not yet: paused either way.
			_ = p.Resume(ctx, info.ID)
			if err := p.Pause(ctx, info.ID); err != nil {
				wctx, cancel := context.WithTimeout(ctx, spillExitWait)
				_, werr := d.Wait(wctx, info.ID)
				cancel()
				if werr != nil {
					return info, fmt.Errorf("pause sandbox %s again after an interrupted checkpoint: %w", info.ID, err)
				}
				m.log.Info("sandbox ended by the checkpoint a stopped node left", logx.SandboxID(info.ID), logx.Err(err))
				return m.listSpilled(info)
			}
		}
		fsutil.RemoveTree(info.Rest.Memory.Dir)
		m.log.Info("sandbox kept paused in memory after an interrupted checkpoint", logx.SandboxID(info.ID))
		return info, m.recordAs(&info, StatePaused, info.Rest.Paused())
	}
	return m.listSpilled(info)
}

// spillExitWait bounds how long adoptSpilling waits for a sandbox its
// checkpoint is ending.
const spillExitWait = 30 * time.Second

// listSpilled records the manifest of a finished checkpoint's image, found
// at a restart.
func (m *Manager) listSpilled(info Info) (Info, error) {
	dir := info.Rest.Memory.Dir
	files, err := template.SumFiles(dir)
	if err != nil || len(files) == 0 {
		return info, errs.New(errs.DataLoss, "sandbox %s: its checkpoint was cut short and left no image: %v", info.ID, err)
	}
	m.log.Info("sandbox's memory on disk after an interrupted checkpoint", logx.SandboxID(info.ID))
	return info, m.recordAs(&info, StatePaused, info.Rest.OnDisk(dir, files))
}
