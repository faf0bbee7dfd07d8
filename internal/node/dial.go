package node

import (
	"context"
	"net"

	"github.com/covesandbox/cove/internal/errs"
)

// Running reports whether a sandbox is in the table and running.
func (m *Manager) Running(id string) bool {
	info, err := m.Get(id)
	return err == nil && info.State == StateRunning
}

// Dial connects to port inside a running sandbox.
func (m *Manager) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	if !m.Running(id) {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return m.driver.Dial(ctx, id, port)
}

// TrafficToken is the token a sandbox's ports require ("" = public).
func (m *Manager) TrafficToken(id string) string {
	info, err := m.Get(id)
	if err != nil {
		return ""
	}
	return info.TrafficToken
}

// SetInternet turns a running sandbox's egress on or off.
func (m *Manager) SetInternet(id string, allowed bool) error {
	sb := m.lookup(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.net == nil || sb.info.Network == nil {
		return errs.New(errs.Conflict, "sandbox %s has no network of its own", id)
	}
	if err := m.cfg.Networks.SetInternet(sb.net, allowed); err != nil {
		return err
	}
	ni := *sb.info.Network // snapshots share the old one
	ni.Internet = allowed
	sb.info.Network = &ni
	return m.writeRecord(sb.info)
}
