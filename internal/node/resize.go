package node

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// Resize gives a paused sandbox another size, which it runs with from its
// resume (E2B's connect with onResume's memoryMB and cpuCount): l's CPUs
// and memory, a zero one keeping the sandbox's. The size is bounded as a
// create's is: by its template's maxCpuCount and maxMemoryMB (checkSize),
// by the node's capacity (fit, the node's promised memory) and by the
// team's quota (quota, else the node's), the sandbox's old size no longer
// counted. Paused in memory, its driver changes its limits in place
// (isolation.Resizer; memory below what it holds is refused); paused as
// files, its next boot takes them. A running sandbox is a Conflict.
func (m *Manager) Resize(ctx context.Context, id string, l isolation.Limits, quota *TeamQuota) (Info, error) {
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch {
	case sb.info.State == StateRunning:
		return Info{}, errs.New(errs.Conflict, "sandbox %s is running: its size changes only as it resumes", id)
	case sb.info.State != StatePaused:
		return Info{}, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	switch ph := sb.info.Phase(); ph {
	case PhasePaused, PhaseOnDisk, PhaseFiles:
	default:
		return Info{}, errs.Retryable(errs.New(errs.Conflict, "sandbox %s is %s: resize it once that ends", id, ph), time.Second, "")
	}
	if l.CPUMillis < 0 || l.MemoryMB < 0 {
		return Info{}, errs.New(errs.InvalidArgument, "cpuCount and memoryMB must be positive")
	}
	tpl, err := m.templateOf(ctx, sb.info)
	if err != nil {
		return Info{}, err
	}
	if err := checkSize(l, tpl, m.templateLimits(tpl)); err != nil {
		return Info{}, err
	}
	next := withDefaults(isolation.Limits{CPUMillis: l.CPUMillis, MemoryMB: l.MemoryMB}, sb.info.Limits)
	if err := next.Validate(); err != nil {
		return Info{}, err
	}
	if next, err = m.cfg.Admission.fit(next); err != nil {
		return Info{}, err
	}
	if next == sb.info.Limits {
		return sb.info, nil
	}
	// Admitted as if the sandbox were new, its old size aside; the table
	// holds its new size from here, so that no create admitted meanwhile
	// counts the old one.
	m.mu.Lock()
	old := sb.limits
	sb.limits = isolation.Limits{}
	err = m.admitLocked(sb.team, quota, next)
	if err == nil {
		sb.limits = next
	} else {
		sb.limits = old
	}
	m.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	undo := func() {
		m.mu.Lock()
		sb.limits = old
		m.mu.Unlock()
	}
	if sb.info.Phase() != PhaseFiles {
		r, err := driverCan[isolation.Resizer](sb.driver, "change a paused sandbox's size")
		if err == nil {
			err = r.Resize(ctx, id, next)
		}
		if err != nil {
			undo()
			return Info{}, err
		}
	}
	rest := sb.info.Rest
	rest.Resized = sb.info.Phase() != PhaseFiles
	if err := m.transition(sb, sb.info.State, rest, func(i *Info) { i.Limits = next }, undo); err != nil {
		return Info{}, err
	}
	m.log.Info("sandbox resized", logx.SandboxID(id), "cpuMillis", next.CPUMillis, "memoryMB", next.MemoryMB)
	return sb.info, nil
}

// templateOf is the template a sandbox started from, for its bounds: its
// saved one when paused as files, else its build's.
func (m *Manager) templateOf(ctx context.Context, info Info) (template.Template, error) {
	if f := info.Rest.Files; f != nil {
		return f.Template, nil
	}
	tpl, err := m.templates.ResolveBuild(ctx, info.TemplateID, info.BuildID)
	if err != nil {
		return template.Template{}, errs.New(errs.InvalidArgument, "sandbox %s cannot be resized: its template's bounds are gone (%v)", info.ID, err)
	}
	return tpl, nil
}

// tellCPUs gives a sandbox resized while paused with its memory (sb.mu
// held, resumed) its CPUs as OMP_NUM_THREADS, which nproc and thread
// pools read (withCPUs), unless its variables set their own.
func (m *Manager) tellCPUs(ctx context.Context, sb *sandbox) {
	vars := withCPUs(nil, sb.info.Limits)
	if _, own := sb.info.EnvVars["OMP_NUM_THREADS"]; own || sb.agent == nil || len(vars) == 0 {
		return
	}
	if err := sb.agent.Init(ctx, envd.InitRequest{EnvVars: vars}); err != nil {
		m.log.Warn("tell a resized sandbox its CPUs", logx.SandboxID(sb.info.ID), logx.Err(err))
	}
}
