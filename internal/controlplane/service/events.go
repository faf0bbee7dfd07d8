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

// event has a sandbox's lifecycle event recorded, stamped now: by
// RecordEvents, in order, so that the operation does not wait for the
// write (a full queue is written at once). A failure is logged, never
// the operation's: the event is the operation's record, not a part of it.
func (s *Service) event(ctx context.Context, sb store.Sandbox, typ, reason string) {
	e := store.NewEvent(sb, typ, reason, time.Now())
	select {
	case s.eventq <- e:
	default:
		s.recordEvent(ctx, e)
	}
}

// recordEvent writes an event (and its deliveries) and wakes the sender.
func (s *Service) recordEvent(ctx context.Context, e store.Event) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.store.AddEvent(ctx, e); err != nil {
		s.log.Error("record a lifecycle event", logx.SandboxID(e.SandboxID), "type", e.Type, logx.Err(err))
		return
	}
	s.webhooks.wake()
}

// RecordEvents writes the queued events until ctx ends, then what is
// queued still; the store must stay open until it returns.
func (s *Service) RecordEvents(ctx context.Context) {
	for {
		select {
		case e := <-s.eventq:
			s.recordEvent(ctx, e)
		case <-ctx.Done():
			for {
				select {
				case e := <-s.eventq:
					s.recordEvent(ctx, e)
				default:
					return
				}
			}
		}
	}
}

// eventOf records an event of a sandbox known by id (its record read).
func (s *Service) eventOf(ctx context.Context, id, typ, reason string) {
	sb, err := s.store.Sandbox(ctx, id)
	if err != nil {
		s.log.Warn("record a lifecycle event", logx.SandboxID(id), "type", typ, logx.Err(err))
		return
	}
	s.event(ctx, sb, typ, reason)
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

// PruneEvents drops events older than kept, every hour until ctx ends.
func (s *Service) PruneEvents(ctx context.Context, kept time.Duration) {
	if kept <= 0 {
		kept = DefaultEventsKept
	}
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := s.store.PruneEvents(ctx, time.Now().Add(-kept)); err != nil && ctx.Err() == nil {
			s.log.Warn("prune lifecycle events", logx.Err(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
