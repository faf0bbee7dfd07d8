package node

import (
	"context"
	"path/filepath"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
)

// SaveLayer copies what a sandbox wrote over its template — its writable
// layer — into the template store and, with memory, its processes into an
// image (isolation.Cloner; a driver without it, a sandbox it cannot
// copy (Unimplemented), or one whose processes are on disk or ended by a
// pause, gives none). A running
// sandbox is frozen for the copy and runs on after it; a paused one stays
// paused (one paused without its memory has its layer saved already).
func (m *Manager) SaveLayer(ctx context.Context, id string, memory bool) (Copy, error) {
	sb := m.lookup(id)
	if sb == nil {
		return Copy{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch sb.info.State {
	case StateRunning, StatePaused:
	default:
		return Copy{}, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	hold := m.templates.Hold()
	release := hold
	if sb.info.Phase() == PhaseFiles {
		// Its files are saved already: the top of its layers.
		info := sb.info
		info.Layers = info.Layers[:len(info.Layers)-1]
		return sandboxes.NewCopy(info, sb.info.Rest.Files.Layer, nil, nil, release), nil
	}
	_, cloner := sb.driver.(isolation.Cloner)
	memory = memory && cloner && sb.info.Rest.Memory == nil
	sum, err := m.copyLayer(ctx, sb, memory, "")
	if err != nil {
		release()
		return Copy{}, err
	}
	// The layer goes at the release unless the caller named it (a
	// snapshot) or a sandbox uses it (a fork's children).
	release = func() {
		hold()
		m.templates.LetGo(sum.Name, m.LayersInUse)
	}
	if !memory {
		return sandboxes.NewCopy(sb.info, sum, nil, nil, release), nil
	}
	// Frozen still, so that its processes match its files.
	image, err := m.image(ctx, sb)
	m.thaw(ctx, sb)
	if errs.Is(err, errs.Unimplemented) { // this sandbox, on a driver that copies others: its files only
		m.log.Info("a sandbox's processes are not copied", logx.SandboxID(id), logx.Err(err))
		return sandboxes.NewCopy(sb.info, sum, nil, nil, release), nil
	}
	if err != nil {
		release()
		return Copy{}, err
	}
	return sandboxes.NewCopy(sb.info, sum, image, nil, func() {
		release()
		m.removeImage(image)
	}), nil
}

// copyLayer copies sb's writable layer into the template store (sb.mu
// held, the store held), merged onto the stored layer onto when given. A
// running sandbox is frozen for the copy and, unless stayFrozen (it ends
// next), thawed after it; on failure it is always thawed.
func (m *Manager) copyLayer(ctx context.Context, sb *sandbox, stayFrozen bool, onto string) (template.LayerSum, error) {
	id := sb.info.ID
	d := sb.driver
	saver, err := driverCan[isolation.LayerSaver](d, "save a sandbox's files")
	if err != nil {
		return template.LayerSum{}, err
	}
	pauser, err := driverCan[isolation.Pauser](d, "save a sandbox's files")
	if err != nil {
		return template.LayerSum{}, err
	}
	start := time.Now()
	stage, err := m.templates.StageLayer()
	if err != nil {
		return template.LayerSum{}, err
	}
	thaw := func() { m.thaw(ctx, sb) }
	if sb.info.State == StateRunning {
		// Recorded first: a node that stops during the copy lets the
		// sandbox run again when it comes back.
		if err := m.transition(sb, StateRunning, Rest{Phase: PhaseSaving}, nil, nil); err != nil {
			return template.LayerSum{}, err
		}
		if err := pauser.Pause(ctx, id); err != nil {
			m.unmarkSaving(sb)
			return template.LayerSum{}, err
		}
	}
	frozenAt := time.Now()
	if err := saver.SaveLayer(ctx, id, stage); err != nil {
		thaw()
		if rerr := fsutil.RemoveTree(stage); rerr != nil {
			m.log.Error("remove a failed copy of a sandbox's files", "path", stage, logx.Err(rerr))
		}
		return template.LayerSum{}, err
	}
	copied := time.Since(frozenAt)
	var avoid []string
	for _, l := range sb.info.Layers {
		if n := filepath.Base(l); n != onto {
			avoid = append(avoid, n)
		}
	}
	if onto != "" {
		stage, err = m.templates.MergeLayer(onto, stage)
	}
	var sum template.LayerSum
	if err == nil {
		sum, err = m.templates.CommitLayer(stage, avoid...)
	}
	if err != nil || !stayFrozen {
		thaw()
	}
	if err != nil {
		return template.LayerSum{}, err
	}
	m.log.Info("sandbox files saved", logx.SandboxID(id), "layer", sum.Name, "files", sum.Files, "bytes", sum.Bytes,
		"copy", copied, "took", time.Since(start))
	return sum, nil
}

// thaw lets a sandbox the copy froze (marked saving) run again (sb.mu
// held); one that was paused already stays so.
func (m *Manager) thaw(ctx context.Context, sb *sandbox) {
	if sb.info.Phase() != PhaseSaving {
		return
	}
	p, err := driverCan[isolation.Pauser](sb.driver, "thaw a sandbox")
	if err == nil {
		err = p.Resume(context.WithoutCancel(ctx), sb.info.ID)
	}
	if err != nil {
		m.log.Error("let a sandbox run again after copying it", logx.SandboxID(sb.info.ID), logx.Err(err))
	}
	m.unmarkSaving(sb)
}

func (m *Manager) unmarkSaving(sb *sandbox) {
	if err := m.transitioned(sb, StateRunning, Rest{}, nil); err != nil {
		m.log.Error("record a sandbox after copying its files", logx.SandboxID(sb.info.ID), logx.Err(err))
	}
}
