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
