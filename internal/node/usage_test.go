package node

import (
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/isolation"
)

// TestMeter: a sandbox's usage runs from the record that says it runs to
// the next that does not (a pause, its end); builds and warm sandboxes (no
// team) count for no one.
func TestMeter(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	limits := isolation.Limits{CPUMillis: 2000, MemoryMB: 512}
	a := Info{ID: "a", Team: "t1", TemplateID: "base", State: StateRunning, Limits: limits}
	b := Info{ID: "b", Team: "t2", TemplateID: "app", State: StateRunning, Limits: limits}
	warm := Info{ID: "w", TemplateID: "base", State: StateRunning, Limits: limits}
	build := Info{ID: "x", Team: "t1", TemplateID: "base", State: StateRunning, Limits: limits, Metadata: map[string]string{BuildKey: "1"}}
	paused := a
	paused.State = StatePaused

	u := newMeter()
	u.observe(a, at(0))
	u.observe(a, at(1)) // a rewrite while it runs changes nothing
	u.observe(warm, at(0))
	u.observe(build, at(0))
	u.observe(b, at(5))
	u.observe(paused, at(10)) // a: 10 s
	u.observe(a, at(20))      // resumed
	u.end("a", at(25))        // a: 15 s in all
	u.end("nope", at(25))
	got := u.usage(at(30)) // b still runs: 25 s
	want := []Usage{
		{Team: "t1", Template: "base", Seconds: 15, CPUSeconds: 30, MemoryGiBSeconds: 7.5},
		{Team: "t2", Template: "app", Seconds: 25, CPUSeconds: 50, MemoryGiBSeconds: 12.5},
	}
	if len(got) != len(want) {
		t.Fatalf("usage %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("usage[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}
