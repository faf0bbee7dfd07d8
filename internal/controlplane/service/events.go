package service

import (
	"context"
	"slices"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

// DefaultEventsKept is how long lifecycle events are kept (E2B's 7 days).
const DefaultEventsKept = 7 * 24 * time.Hour

// MaxEventsPage bounds a page of events.
const MaxEventsPage = 1000

// event is a sandbox's lifecycle event now, for logLine to record with
// the operation's log line, as the operation's record.
func event(sb store.Sandbox, typ, reason string) store.Event {
	return store.NewEvent(sb, typ, reason, time.Now())
}

// eventOf records an event of a sandbox known by id (its record read)
// that has no log line of its own. A failure is logged, never the
// operation's.
func (s *Service) eventOf(ctx context.Context, id, typ, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	sb, err := s.store.Sandbox(ctx, id)
	if err == nil {
		err = s.store.AddEvent(ctx, event(sb, typ, reason))
	}
	if err != nil {
		s.log.Warn("record a lifecycle event", logx.SandboxID(id), "type", typ, logx.Err(err))
		return
	}
	s.webhooks.wake()
}

// endReason is why a sandbox that ended on its node did.
func endReason(exit isolation.Exit) string {
	switch {
	case exit.Detail == "timeout":
		return store.ReasonTimeout
	case exit.Detail != "":
		return exit.Detail
	}
	return string(exit.Reason)
}

// EventQuery is a request for a team's events.
type EventQuery = store.EventQuery

// Events returns a team's events (one sandbox's when q names one).
func (s *Service) Events(ctx context.Context, q EventQuery) ([]store.Event, error) {
	if q.Limit <= 0 || q.Limit > MaxEventsPage {
		return nil, errs.New(errs.InvalidArgument, "limit: 1 to %d", MaxEventsPage)
	}
	if q.Offset < 0 {
		return nil, errs.New(errs.InvalidArgument, "offset: 0 or more")
	}
	for _, t := range q.Types {
		if !slices.Contains(store.EventTypes, t) {
			return nil, errs.New(errs.InvalidArgument, "types: %q is not an event type (%v)", t, store.EventTypes)
		}
	}
	return s.store.Events(ctx, q)
}

// PruneEvents drops events older than kept, and the idempotency keys kept
// past their time, every hour until ctx ends.
func (s *Service) PruneEvents(ctx context.Context, kept time.Duration) {
	if kept <= 0 {
		kept = DefaultEventsKept
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := s.store.PruneEvents(ctx, s.now().Add(-kept)); err != nil && ctx.Err() == nil {
			s.log.Warn("prune lifecycle events", logx.Err(err))
		}
		s.pruneIdempotent(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
