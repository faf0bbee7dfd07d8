package service

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// errBuildCancelled ends a build its team cancelled: the cause of its
// context, and the reason its record gives.
var errBuildCancelled = errs.New(errs.Canceled, template.CancelledReason)

// cancelPoll is how often a running build's record is read for a cancel
// asked of another API replica, and how often CancelBuild reads it until
// the build ended.
const cancelPoll = 500 * time.Millisecond

// CancelBuild stops a team's unfinished build: its steps' processes and
// build sandboxes go, what it wrote is removed, and it ends as failed
// ("error") with a reason that says it was cancelled. A build that never
// started ends at once. It waits, within ctx, for the build to end and
// returns it as recorded: still unfinished when ctx ended first (it ends
// shortly). A build that ended already is a Conflict.
func (t *Templates) CancelBuild(ctx context.Context, team, templateID, buildID string) (template.Build, error) {
	r, err := t.owned(team, templateID)
	if err != nil {
		return template.Build{}, err
	}
	if r.Build(buildID) == nil {
		return template.Build{}, errs.New(errs.NotFound, "build %s of template %s not found", buildID, templateID)
	}
	b, err := t.store.RequestCancel(r.ID, buildID, errBuildCancelled.Error())
	if err != nil {
		return b, err
	}
	t.mu.Lock()
	bl := t.logs[buildID]
	t.mu.Unlock()
	if bl != nil && bl.cancel != nil {
		bl.cancel(errBuildCancelled)
		select {
		case <-bl.done:
		case <-ctx.Done():
		}
	}
	for {
		r, err := t.store.Get("", r.ID)
		if err != nil {
			return template.Build{}, err
		}
		if b := r.Build(buildID); b == nil || !b.Unfinished() || ctx.Err() != nil {
			if b == nil {
				return template.Build{}, errs.New(errs.NotFound, "build %s of template %s not found", buildID, templateID)
			}
			return *b, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(cancelPoll):
		}
	}
}

// watchCancel cancels a build run here once its record asks for it (a
// cancel that reached another API replica of a cluster), until stop.
func (t *Templates) watchCancel(ctx context.Context, templateID, buildID string, bl *buildLog) (stop func()) {
	if bl.cancel == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-time.After(cancelPoll):
			}
			if r, err := t.store.Get("", templateID); err == nil {
				if b := r.Build(buildID); b != nil && b.CancelRequested {
					bl.cancel(errBuildCancelled)
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// recordCancelled records a cancelled build as failed for that reason
// (its builder, a cluster's node, recorded only that its context ended);
// one that became ready first stays ready.
func (t *Templates) recordCancelled(templateID, buildID string, logf func(template.LogEntry)) {
	r, err := t.store.Get("", templateID)
	if err != nil {
		return
	}
	b := r.Build(buildID)
	if b == nil || b.Status == template.StatusReady || b.Reason == errBuildCancelled.Error() {
		return
	}
	if b.Unfinished() {
		logf(template.LogEntry{Time: time.Now(), Level: "error", Message: "build failed: " + errBuildCancelled.Error(), Final: true})
	}
	b.Status, b.Reason, b.ReasonStep, b.CancelRequested = template.StatusError, errBuildCancelled.Error(), "", false
	if b.FinishedAt.IsZero() {
		b.FinishedAt = time.Now().UTC()
	}
	if err := t.store.SetBuild(templateID, *b); err != nil {
		t.log.Error("record a cancelled build", "template", templateID, "build", buildID, logx.Err(err))
	}
}
