package service

import (
	"context"

	"github.com/covesandbox/cove/internal/sandboxes"
)

// endNow ends a team's running sandbox now, as its timeout would: paused
// with auto-pause (with its memory unless it was created to keep its files
// only), else killed. That is E2B's answer to POST /sandboxes/{id}/timeout
// with a timeout of 0 or less (create, connect, resume and fork still
// refuse 0). The record follows before it returns, as after a pause or a
// kill through the API: a remote node's news of it may come later.
func (s *Service) endNow(ctx context.Context, team, id string) error {
	if _, err := s.Get(ctx, team, id); err != nil {
		return err
	}
	info, err := s.node.SetTimeout(ctx, id, 0)
	if err != nil {
		return err
	}
	switch info.State {
	case sandboxes.StatePaused:
		s.StateChanged(info)
	case sandboxes.StateKilled:
		s.Ended(id, info.Exit)
	}
	return nil
}
