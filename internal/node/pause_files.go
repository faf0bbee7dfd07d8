package node

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// PauseFiles pauses a sandbox without its memory: its files are saved as a
// layer (as a snapshot's are), its processes end, and it holds no memory,
// CPU or network until Resume boots it again over those files, with the
// same id and tokens (its template's start command runs again). A sandbox
// paused with its memory can be turned into one paused without; one
// paused without is a Conflict.
func (m *Manager) PauseFiles(ctx context.Context, id string) (Info, error) {
	start := time.Now()
	info, err := m.pauseFiles(ctx, id)
	if err == nil {
		m.observe(func(o Observer) { o.Paused(time.Since(start), false) })
	}
	return info, err
}

func (m *Manager) pauseFiles(ctx context.Context, id string) (Info, error) {
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	cur := sb.snapshot()
	tpl, err := m.templates.ResolveBuild(ctx, cur.TemplateID, cur.BuildID)
	if err != nil {
		return Info{}, errs.New(errs.Conflict, "sandbox %s cannot be paused without its memory: its template build %s/%s is gone (%v); pause it with its memory", id, cur.TemplateID, cur.BuildID, err)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch {
	case sb.info.Phase() == PhaseFiles:
		return Info{}, errs.New(errs.Conflict, "sandbox %s is already paused", id)
	case sb.info.State != StateRunning && sb.info.State != StatePaused:
		return Info{}, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	release := m.templates.Hold()
	defer release()
	layers := sb.info.Layers
	if own := sb.info.OwnLayer; own != "" && len(layers) > 0 && filepath.Base(layers[len(layers)-1]) == own {
		layers = layers[:len(layers)-1] // merged into the new one
	} else {
		sb.info.OwnLayer = ""
	}
	sum, err := m.copyLayer(ctx, sb, true, sb.info.OwnLayer)
	if err != nil {
		return Info{}, err
	}
	d := sb.driver
	// From here the saved files are the sandbox: recorded before its
	// processes end, so that a crash in between boots it from them.
	prev := sb.info
	tpl.RootFS.Layers = append(slices.Clone(layers), m.templates.LayerPath(sum.Name))
	tpl.Saved = nil // SavedFiles.Layer is what is checked at the boot
	tpl.Image = nil // it boots: no processes carried over
	// A shared copy of its files taken at a pause with its memory is
	// stale now: they are saved, and shared below. Its memory on disk, if
	// any, is removed below (a restart in between removes it: adoptSaved).
	if err := m.transition(sb, StatePaused, Rest{Phase: PhaseFiles, Files: &SavedFiles{Layer: sum, Template: tpl}}, func(i *Info) {
		i.Layers, i.OwnLayer = tpl.RootFS.Layers, sum.Name
	}, func() { m.thaw(ctx, sb) }); err != nil { // one the copy froze runs again
		return Info{}, err
	}
	sb.timer.Stop()
	if sb.agent != nil {
		sb.agent.Close()
	}
	if p, ok := d.(isolation.Pauser); ok && prev.Rest.Memory == nil {
		// Thawed first: a runtime may not end a frozen sandbox.
		if err := p.Resume(context.WithoutCancel(ctx), id); err != nil {
			m.log.Warn("thaw a sandbox to end its processes", logx.SandboxID(id), logx.Err(err))
		}
	}
	if sb.spill != nil {
		sb.spill.Stop()
	}
	if sp := prev.Rest.Memory; sp != nil { // its memory on disk goes too
		if err := fsutil.RemoveTree(sp.Dir); err != nil {
			m.log.Error("remove the saved memory of a sandbox paused without it", logx.SandboxID(id), logx.Err(err))
		}
	}
	if err := d.Destroy(context.WithoutCancel(ctx), id); err != nil {
		// Its record says paused without memory: a restarted node removes
		// what is left of it.
		m.log.Error("end a sandbox paused without its memory", logx.SandboxID(id), logx.Err(err))
	}
	if sb.net != nil {
		m.cfg.Networks.Release(sb.net)
		sb.net = nil
	}
	files := *sb.info.Rest.Files
	if m.cfg.Share != nil && len(sb.info.Volumes) == 0 {
		// Shared, it outlives this node; not shared (or mounting this
		// node's volumes), it stays here alone.
		blobs, err := m.cfg.Share(context.WithoutCancel(ctx), sandboxes.LayerNames(sb.info.Layers))
		if err != nil {
			m.log.Warn("share the files of a sandbox paused without its memory: it can resume on this node only", logx.SandboxID(id), logx.Err(err))
		}
		files.Blobs = blobs
	}
	// Its processes ended: it holds no handle.
	if err := m.transitioned(sb, StatePaused, Rest{Phase: PhaseFiles, Files: &files}, func(i *Info) { i.Handle = isolation.Handle{} }); err != nil {
		m.log.Error("record a sandbox paused without its memory", logx.SandboxID(id), logx.Err(err))
	}
	m.log.Info("sandbox paused without its memory", logx.SandboxID(id), "layer", sum.Name)
	return sb.info, nil
}

// reboot starts a sandbox paused without its memory again over its saved
// files (sb.mu held), ending timeout from now; the caller runs its start
// command once it lets go of sb. Its files are checked first; on any
// failure it stays paused.
func (m *Manager) reboot(ctx context.Context, sb *sandbox, timeout time.Duration) error {
	saved := sb.info.Rest.Files
	if err := m.templates.VerifyLayer(saved.Layer); err != nil {
		m.log.Error("saved files refused", logx.SandboxID(sb.info.ID), logx.Err(err))
		return err
	}
	info := sb.info
	info.State = StateCreating
	want := &NetworkInfo{Internet: true}
	if info.Network != nil {
		want = info.Network
	}
	n, err := m.launch(ctx, &info, saved.Template, want, false, nil)
	if err != nil {
		return err
	}
	agent := m.agentFor(info.ID)
	agent.SetToken(info.AccessToken)
	info.EndAt = time.Now().UTC().Add(timeout)
	err = m.trustEgressCA(ctx, agent, info.Network)
	if err == nil {
		err = m.recordAs(&info, StateRunning, Rest{})
	}
	if err != nil {
		agent.Close()
		if derr := m.recordDriver(info).Destroy(context.WithoutCancel(ctx), info.ID); derr != nil {
			m.log.Error("destroy a sandbox whose boot was not recorded", logx.SandboxID(info.ID), logx.Err(derr))
		} else if n != nil {
			m.cfg.Networks.Release(n)
		}
		return err
	}
	sb.info, sb.agent, sb.net = info, agent, n
	sb.timer.Reset(timeout)
	m.watch(sb)
	m.log.Info("sandbox booted again from its saved files", logx.SandboxID(info.ID), "layer", saved.Layer.Name)
	return nil
}
