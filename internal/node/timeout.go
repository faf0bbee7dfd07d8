package node

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/errs"
)

// SetTimeout makes a running sandbox end timeout from now (it may shorten
// its life, as E2B's POST /sandboxes/{id}/timeout does). A timeout of 0 or
// less ends its time now, as its timer would: it is paused or killed as its
// lifecycle says before SetTimeout returns the sandbox as it is then.
func (m *Manager) SetTimeout(_ context.Context, id string, timeout time.Duration) (Info, error) {
	if timeout <= 0 {
		return m.endNow(id)
	}
	return m.retime(id, timeout, false)
}

// endNow ends a running sandbox's time now (timeUp).
func (m *Manager) endNow(id string) (Info, error) {
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	state := sb.info.State
	if state == StateRunning {
		sb.timer.Stop()
		sb.info.EndAt = time.Now().UTC()
	}
	sb.mu.Unlock()
	if state != StateRunning {
		return Info{}, errs.New(errs.NotFound, "sandbox %s is %s", id, state)
	}
	if err := m.timeUp(id); err != nil {
		return Info{}, err
	}
	return sb.snapshot(), nil
}

// ExtendTimeout moves a running sandbox's end to timeout from now unless
// it already ends later (E2B's connect semantics).
func (m *Manager) ExtendTimeout(_ context.Context, id string, timeout time.Duration) (Info, error) {
	return m.retime(id, timeout, true)
}

// checkTimeout refuses a timeout the node does not give.
func (m *Manager) checkTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return errs.New(errs.InvalidArgument, "timeout must be greater than 0")
	}
	if timeout > m.cfg.MaxTimeout {
		return errs.New(errs.InvalidArgument, "timeout cannot be greater than %s", m.cfg.MaxTimeout)
	}
	return nil
}

func (m *Manager) retime(id string, timeout time.Duration, extendOnly bool) (Info, error) {
	if err := m.checkTimeout(timeout); err != nil {
		return Info{}, err
	}
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.info.State != StateRunning {
		return Info{}, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	end := time.Now().UTC().Add(timeout)
	if extendOnly && end.Before(sb.info.EndAt) {
		return sb.info, nil
	}
	sb.info.EndAt = end
	sb.timer.Reset(time.Until(end))
	if err := m.writeRecord(sb.info); err != nil {
		return Info{}, err
	}
	return sb.info, nil
}
