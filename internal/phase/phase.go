// Package phase times the phases of one operation of a node (a create, a
// kill) along its path, through the context: the node starts a Timer,
// and each layer it calls (the driver, the network) marks where its
// phases end. Each mark's duration runs from the previous mark (or the
// start), so an operation's phases add up to its whole time.
package phase

import (
	"context"
	"time"
)

// Recorder receives each phase's duration (the node's metrics).
type Recorder interface {
	Phase(op, phase string, d time.Duration)
}

// Timer times one operation's phases. Marks come from the goroutine
// that runs the operation, one after another.
type Timer struct {
	op   string
	rec  Recorder
	last time.Time
}

type key struct{}

// Start returns ctx carrying a timer for op, which reports to rec; with
// a nil rec, it returns ctx as it is and marks do nothing.
func Start(ctx context.Context, rec Recorder, op string) context.Context {
	if rec == nil {
		return ctx
	}
	return context.WithValue(ctx, key{}, &Timer{op: op, rec: rec, last: time.Now()})
}

// Mark ends the phase named name: its time is what passed since the
// previous mark. Without a timer in ctx it does nothing.
func Mark(ctx context.Context, name string) {
	t, _ := ctx.Value(key{}).(*Timer)
	if t == nil {
		return
	}
	now := time.Now()
	t.rec.Phase(t.op, name, now.Sub(t.last))
	t.last = now
}
