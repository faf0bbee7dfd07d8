package node

import (
	"context"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/phase"
)

// Kill ends a sandbox and removes everything it owned. Killing a sandbox
// that is already gone is NotFound; concurrent kills all wait for the same
// teardown.
func (m *Manager) Kill(ctx context.Context, id string) error {
	sb := m.lookup(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	start := time.Now()
	err := m.end(phase.Start(ctx, m.phases(), "kill"), sb, isolation.Exit{Reason: isolation.ExitDestroyed, Detail: KilledDetail})
	if err == nil {
		m.observe(func(o Observer) { o.Killed(time.Since(start)) })
	}
	return err
}

// end moves a sandbox to killed (once), destroys it through the driver and
// drops it from the table.
func (m *Manager) end(ctx context.Context, sb *sandbox, exit isolation.Exit) error {
	sb.mu.Lock()
	if sb.info.State == StateKilled {
		sb.mu.Unlock()
		select {
		case <-sb.ended:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if sb.info.State == StateCreating {
		sb.mu.Unlock()
		return errs.New(errs.Conflict, "sandbox %s is still being created", sb.info.ID)
	}
	paused := sb.info.Phase() == PhasePaused // frozen, not ended
	spilled := sb.info.Rest.Memory
	if sb.spill != nil {
		sb.spill.Stop()
	}
	m.killing(sb, exit)
	if sb.timer != nil {
		sb.timer.Stop()
	}
	id := sb.info.ID
	sb.mu.Unlock()

	if sb.agent != nil {
		sb.agent.Close()
	}
	if p, ok := m.driverOf(id).(isolation.Pauser); ok && paused {
		// Thawed first: a runtime may not end a frozen sandbox.
		if err := p.Resume(ctx, id); err != nil {
			m.log.Warn("resume a paused sandbox to end it", logx.SandboxID(id), logx.Err(err))
		}
	}
	if err := m.driverOf(id).Destroy(ctx, id); err != nil {
		// Keep the record: Recover retries the teardown after a restart.
		return fmt.Errorf("kill sandbox %s: %w", id, err)
	}
	phase.Mark(ctx, "destroy")
	if sb.net != nil {
		m.cfg.Networks.Release(sb.net)
		phase.Mark(ctx, "network")
	}
	if spilled != nil {
		if err := fsutil.RemoveTree(spilled.Dir); err != nil {
			m.log.Error("remove a killed sandbox's saved memory", logx.SandboxID(id), logx.Err(err))
		}
	}
	m.removeRecord(id)
	m.mu.Lock()
	if m.sandboxes[id] == sb {
		delete(m.sandboxes, id)
	}
	m.mu.Unlock()
	close(sb.ended)
	phase.Mark(ctx, "record")
	m.log.Info("sandbox killed", logx.SandboxID(id), "reason", exit.Reason, "detail", exit.Detail)
	if m.cfg.OnEnd != nil {
		m.cfg.OnEnd(sb.snapshot())
	}
	return nil
}

// expire is the reaper: a sandbox's timer fired.
func (m *Manager) expire(id string) {
	if err := m.timeUp(id); err != nil {
		m.log.Error("end expired sandbox", logx.SandboxID(id), logx.Err(err))
	}
}

// timeUp ends a sandbox's time: one with AutoPause is paused (killed if
// that fails), any other killed. One paused meanwhile stays paused.
func (m *Manager) timeUp(id string) error {
	sb := m.lookup(id)
	if sb == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cur := sb.snapshot(); cur.AutoPause {
		pause := func(ctx context.Context, id string) (Info, error) { return m.Pause(ctx, id, false) }
		if cur.AutoPauseFiles {
			pause = m.PauseFiles
		}
		info, err := pause(ctx, id)
		switch {
		case err == nil:
			m.log.Info("sandbox paused at its timeout", logx.SandboxID(id))
			if m.cfg.OnState != nil {
				m.cfg.OnState(info)
			}
			return nil
		case errs.Is(err, errs.Conflict) && sb.snapshot().State != StateRunning:
			return nil // paused already: nothing runs to end
		}
		m.log.Error("pause at the timeout; killing instead", logx.SandboxID(id), logx.Err(err))
	}
	return m.end(ctx, sb, isolation.Exit{Reason: isolation.ExitDestroyed, Detail: "timeout"})
}

// watch ends a sandbox whose init died on its own (agent crash, OOM of the
// agent), recording why.
func (m *Manager) watch(sb *sandbox) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-m.closing:
				cancel()
			case <-sb.ended:
				cancel()
			}
		}()
		exit, err := m.driverOf(sb.snapshot().ID).Wait(ctx, sb.snapshot().ID)
		if err != nil || exit.Reason == isolation.ExitDestroyed || exit.Reason == isolation.ExitCheckpointed {
			return // a checkpointed sandbox is restored, and watched, again
		}
		end, endCancel := context.WithTimeout(context.Background(), time.Minute)
		defer endCancel()
		if err := m.end(end, sb, exit); err != nil {
			m.log.Error("clean up dead sandbox", logx.SandboxID(sb.snapshot().ID), logx.Err(err))
		}
	}()
}
