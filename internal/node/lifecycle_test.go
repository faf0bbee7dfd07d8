package node

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/template"
)

func TestPhaseOfRecord(t *testing.T) {
	for _, c := range []struct {
		info Info
		want Phase
	}{
		{Info{}, PhaseNone},
		{Info{State: StateCreating}, PhaseCreating},
		{Info{State: StateRunning}, PhaseRunning},
		{Info{State: StateRunning, Saving: true}, PhaseSaving},
		{Info{State: StatePaused}, PhasePaused},
		{Info{State: StatePaused, Fallback: &SavedState{}}, PhasePaused},
		{Info{State: StatePaused, Spilled: &SpillState{Dir: "d"}}, PhaseSpilling},
		{Info{State: StatePaused, Spilled: &SpillState{Dir: "d", Files: nil}}, PhaseSpilling},
		{Info{State: StatePaused, Spilled: &SpillState{Dir: "d", Files: []template.FileSum{{}}}}, PhaseOnDisk},
		{Info{State: StatePaused, Saved: &SavedState{}}, PhaseFiles},
		{Info{State: StateKilled}, PhaseKilled},
	} {
		if got := c.info.Phase(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.info, got, c.want)
		}
	}
}

func TestLegalTransitions(t *testing.T) {
	for _, c := range []struct {
		from, to Phase
		want     bool
	}{
		{PhaseNone, PhaseRunning, true},  // created: creating is never recorded
		{PhaseFiles, PhaseRunning, true}, // booted again
		{PhaseRunning, PhaseRunning, true},
		{PhasePaused, PhaseSpilling, true},
		{PhaseSpilling, PhaseOnDisk, true},
		{PhaseOnDisk, PhaseRunning, true},
		{PhaseNone, PhasePaused, false},
		{PhaseRunning, PhaseSpilling, false},
		{PhaseRunning, PhaseOnDisk, false},
		{PhaseFiles, PhasePaused, false},
		{PhaseOnDisk, PhasePaused, false},
		{PhaseKilled, PhaseRunning, false},
		{PhaseSpilling, PhaseRunning, false},
	} {
		if got := legal(c.from, c.to); got != c.want {
			t.Errorf("%s → %s: legal %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

// TestArchitectureDrawsTheLifecycle: docs/ARCHITECTURE.md's table of the
// lifecycle is Transitions, row for row.
func TestArchitectureDrawsTheLifecycle(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- lifecycle table: internal/node/lifecycle.go -->\n", "<!-- end of the lifecycle table -->"
	_, rest, ok := strings.Cut(string(doc), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("docs/ARCHITECTURE.md has no lifecycle table between %q and %q", begin, end)
	}
	var want strings.Builder
	want.WriteString("| from | to | by |\n|---|---|---|\n")
	for _, tr := range Transitions {
		fmt.Fprintf(&want, "| %s | %s | %s |\n", tr.From, tr.To, tr.By)
	}
	if table != want.String() {
		t.Errorf("docs/ARCHITECTURE.md's lifecycle table is not Transitions'; it should read:\n%s", want.String())
	}
}
