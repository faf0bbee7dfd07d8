package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Pause freezes a running sandbox in place: its processes stop where they
// are, its memory stays, it takes no CPU, and its timeout stops (it starts
// again at Resume). The record says paused, so a restarted node adopts it
// paused. A sandbox already paused is a Conflict.
//
// Its agent is asked first whether it answers (AgentProbeTimeout). One
// that does not is paused all the same and marked (Rest.Unresponsive):
// its memory holds the agent that did not answer, so it resumes only
// booted afresh over its files (E2B's envdUnresponsiveAtPause). With
// strict, such a pause is refused instead (Unavailable, to retry) and the
// sandbox runs on.
func (m *Manager) Pause(ctx context.Context, id string, strict bool) (Info, error) {
	start := time.Now()
	info, err := m.pause(ctx, id, strict)
	if err == nil {
		m.observe(func(o Observer) { o.Paused(time.Since(start), true) })
	}
	return info, err
}

// AgentProbeTimeout bounds how long a pause waits for a sandbox's agent
// to answer before it takes it for unresponsive.
const AgentProbeTimeout = 3 * time.Second

func (m *Manager) pause(ctx context.Context, id string, strict bool) (Info, error) {
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	p, err := driverCan[isolation.Pauser](m.driverOf(id), "pause a sandbox")
	if err != nil {
		return Info{}, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch sb.info.State {
	case StatePaused:
		return Info{}, errs.New(errs.Conflict, "sandbox %s is already paused", id)
	case StateRunning:
	default:
		return Info{}, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	rest := Rest{Phase: PhasePaused}
	if err := m.probeAgent(ctx, sb); err != nil {
		if ctx.Err() != nil {
			return Info{}, ctx.Err()
		}
		if strict {
			return Info{}, errs.Retryable(errs.New(errs.Unavailable,
				"sandbox %s was not paused: its agent does not answer (%v); it runs on", id, err), time.Second, "")
		}
		m.log.Warn("pausing a sandbox whose agent does not answer: it resumes only booted afresh", logx.SandboxID(id), logx.Err(err))
		rest.Unresponsive = true
	}
	if err := p.Pause(ctx, id); err != nil {
		return Info{}, err
	}
	if sb.net != nil { // frozen, it holds nothing in the egress proxy
		m.cfg.Networks.CloseFlows(sb.net)
	}
	sb.timer.Stop()
	if err := m.transition(sb, StatePaused, rest, nil, func() {
		// Unrecorded, the pause would not survive a restart: undo it.
		_ = p.Resume(context.WithoutCancel(ctx), id)
		sb.timer.Reset(time.Until(sb.info.EndAt))
	}); err != nil {
		return Info{}, err
	}
	m.shareFiles(ctx, sb)
	m.scheduleSpill(sb)
	m.log.Info("sandbox paused", logx.SandboxID(id))
	return sb.info, nil
}

// probeAgent asks a running sandbox's agent (sb.mu held) whether it
// answers, for at most AgentProbeTimeout.
func (m *Manager) probeAgent(ctx context.Context, sb *sandbox) error {
	if sb.agent == nil {
		return nil // adopted without one: nothing to ask
	}
	probe, cancel := context.WithTimeout(ctx, AgentProbeTimeout)
	defer cancel()
	err := sb.agent.Health(probe)
	if err != nil && probe.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("no answer in %s", AgentProbeTimeout)
	}
	return err
}

// shareFiles copies the files of a sandbox just paused with its memory
// (sb.mu held) and shares them (Config.Share), for another node to boot it
// from if this one is lost: Rest.Files. Without it the pause stands,
// bound to this node.
func (m *Manager) shareFiles(ctx context.Context, sb *sandbox) {
	if m.cfg.Share == nil || len(sb.info.Volumes) > 0 {
		return
	}
	id := sb.info.ID
	fail := func(err error) {
		m.log.Warn("share the files of a sandbox paused with its memory: it resumes on this node only", logx.SandboxID(id), logx.Err(err))
	}
	tpl, err := m.templates.ResolveBuild(ctx, sb.info.TemplateID, sb.info.BuildID)
	if err != nil {
		fail(err)
		return
	}
	release := m.templates.Hold()
	defer release()
	sum, err := m.copyLayer(ctx, sb, true, "") // paused: nothing to freeze or thaw
	if err != nil {
		fail(err)
		return
	}
	tpl.RootFS.Layers = append(slices.Clone(sb.info.Layers), m.templates.LayerPath(sum.Name))
	tpl.Saved, tpl.Image = nil, nil
	blobs, err := m.cfg.Share(context.WithoutCancel(ctx), sandboxes.LayerNames(tpl.RootFS.Layers))
	if err != nil {
		fail(err)
		return
	}
	rest := sb.info.Rest
	rest.Files = &SavedFiles{Layer: sum, Template: tpl, Blobs: blobs}
	if err := m.transition(sb, StatePaused, rest, nil, nil); err != nil {
		fail(err)
	}
}

// Resume lets a paused sandbox run again from where it stopped; it ends
// timeout from now. A running sandbox is a Conflict.
func (m *Manager) Resume(ctx context.Context, id string, timeout time.Duration) (Info, error) {
	start := time.Now()
	info, err := m.resume(ctx, id, timeout)
	if err == nil {
		m.observe(func(o Observer) { o.Resumed(time.Since(start)) })
	}
	return info, err
}

func (m *Manager) resume(ctx context.Context, id string, timeout time.Duration) (Info, error) {
	if err := m.checkTimeout(timeout); err != nil {
		return Info{}, err
	}
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	p, ok := m.driverOf(id).(isolation.Pauser)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch {
	case sb.info.State == StateRunning:
		return Info{}, errs.New(errs.Conflict, "sandbox %s is already running", id)
	case sb.info.State != StatePaused || !ok:
		return Info{}, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	if sb.info.Rest.Unresponsive {
		return Info{}, errs.Final(errs.New(errs.Conflict,
			"sandbox %s was paused while its agent did not answer: its memory would bring that agent back", id), errs.CodeGuestUnresponsive)
	}
	if sb.spill != nil {
		sb.spill.Stop()
	}
	resized := sb.info.Rest.Resized
	if sb.info.Phase() == PhaseOnDisk {
		if err := m.restoreSpilled(ctx, sb, timeout); err != nil {
			return Info{}, err
		}
		if resized {
			m.tellCPUs(ctx, sb)
		}
		return sb.info, nil
	}
	if sb.info.Phase() == PhaseFiles {
		saved := sb.info.Rest.Files
		if err := m.reboot(ctx, sb, timeout); err != nil {
			return Info{}, err
		}
		info := sb.info
		if saved.Template.StartCmd != "" {
			// Its template's start command runs again, as at its create;
			// the resume answers once it is ready.
			sb.mu.Unlock()
			err := startCommand(ctx, m.agentOf(id), saved.Template)
			sb.mu.Lock()
			if err != nil {
				m.log.Error("start command of a sandbox booted again", logx.SandboxID(id), logx.Err(err))
			}
		}
		return info, nil
	}
	if err := p.Resume(ctx, id); err != nil {
		return Info{}, err
	}
	sb.timer.Reset(timeout)
	// A shared copy of its files is stale now.
	if err := m.transitioned(sb, StateRunning, Rest{}, func(i *Info) { i.EndAt = time.Now().UTC().Add(timeout) }); err != nil {
		m.log.Error("record a resumed sandbox", logx.SandboxID(id), logx.Err(err))
	}
	if resized {
		m.tellCPUs(ctx, sb)
	}
	m.log.Info("sandbox resumed", logx.SandboxID(id), "timeout", timeout)
	return sb.info, nil
}

// Wake resumes a paused sandbox with AutoResume for the traffic that
// reached it (for its create's timeout) and reports whether it runs now.
// One paused without its memory is not woken: booted afresh, it would not
// be the one the traffic was for (E2B's rule too).
func (m *Manager) Wake(ctx context.Context, id string) bool {
	info, err := m.get(id)
	if err != nil {
		return false
	}
	switch info.Phase() {
	case PhaseRunning, PhaseSaving:
		return true
	case PhasePaused, PhaseOnDisk:
		if !info.AutoResume || info.Rest.Unresponsive { // the latter resumes only booted afresh
			return false
		}
	default: // paused as files: not woken
		return false
	}
	timeout := info.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	info, err = m.Resume(ctx, id, min(timeout, m.cfg.MaxTimeout))
	switch {
	case errs.Is(err, errs.Conflict): // another request woke it
		return true
	case err != nil:
		m.log.Error("resume a sandbox on traffic", logx.SandboxID(id), logx.Err(err))
		return false
	}
	m.log.Info("sandbox resumed by traffic", logx.SandboxID(id))
	if m.cfg.OnState != nil {
		m.cfg.OnState(info)
	}
	return true
}
