package node

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// SaveLayer copies what a sandbox wrote over its template — its writable
// layer — into the template store and returns the layer's manifest entry.
// A running sandbox is frozen for the copy and runs on after it; a paused
// one stays paused. The caller must name the layer (a template build, a
// sandbox) before it calls release: until then Collect leaves it alone.
func (m *Manager) SaveLayer(ctx context.Context, id string) (Info, template.LayerSum, func(), error) {
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, template.LayerSum{}, nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	d := m.driverOf(id)
	saver, ok := d.(isolation.LayerSaver)
	pauser, ok2 := d.(isolation.Pauser)
	if !ok || !ok2 || !d.Capabilities().Pause {
		return Info{}, template.LayerSum{}, nil, errs.New(errs.Unimplemented, "the %s driver cannot save a sandbox's files", d.Name())
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch sb.info.State {
	case StateRunning, StatePaused:
	default:
		return Info{}, template.LayerSum{}, nil, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	start := time.Now()
	release := m.templates.Hold()
	stage, err := m.templates.StageLayer()
	if err != nil {
		release()
		return Info{}, template.LayerSum{}, nil, err
	}
	freeze := sb.info.State == StateRunning
	frozenAt := time.Now()
	if freeze {
		// Recorded first: a node that stops during the copy lets the
		// sandbox run again when it comes back.
		sb.info.Saving = true
		if err := m.writeRecord(sb.info); err != nil {
			sb.info.Saving = false
			release()
			return Info{}, template.LayerSum{}, nil, err
		}
		if err := pauser.Pause(ctx, id); err != nil {
			m.unmarkSaving(sb)
			release()
			return Info{}, template.LayerSum{}, nil, err
		}
	}
	err = saver.SaveLayer(ctx, id, stage)
	if freeze {
		if rerr := pauser.Resume(context.WithoutCancel(ctx), id); rerr != nil {
			m.log.Error("let a sandbox run again after copying its files", logx.SandboxID(id), logx.Err(rerr))
			if err == nil {
				err = rerr
			}
		}
		m.unmarkSaving(sb)
	}
	copied := time.Since(frozenAt)
	if err != nil {
		if rerr := fsutil.RemoveTree(stage); rerr != nil {
			m.log.Error("remove a failed copy of a sandbox's files", "path", stage, logx.Err(rerr))
		}
		release()
		return Info{}, template.LayerSum{}, nil, err
	}
	sum, err := m.templates.CommitLayer(stage)
	if err != nil {
		release()
		return Info{}, template.LayerSum{}, nil, err
	}
	m.log.Info("sandbox files saved", logx.SandboxID(id), "layer", sum.Name, "files", sum.Files, "bytes", sum.Bytes,
		"copy", copied, "took", time.Since(start))
	return sb.info, sum, release, nil
}

func (m *Manager) unmarkSaving(sb *sandbox) {
	sb.info.Saving = false
	if err := m.writeRecord(sb.info); err != nil {
		m.log.Error("record a sandbox after copying its files", logx.SandboxID(sb.info.ID), logx.Err(err))
	}
}
