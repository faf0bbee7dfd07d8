package node

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/template"
)

func TestPhaseOfRecord(t *testing.T) {
	onDisk := &MemoryOnDisk{Dir: "d", Files: []template.FileSum{{}}}
	for _, c := range []struct {
		info Info
		want Phase
	}{
		{Info{}, PhaseNone},
		{Info{State: StateCreating}, PhaseCreating},
		{Info{State: StateRunning}, PhaseRunning},
		{Info{State: StateRunning, Rest: Rest{Phase: PhaseSaving}}, PhaseSaving},
		{Info{State: StatePaused, Rest: Rest{Phase: PhasePaused}}, PhasePaused},
		{Info{State: StatePaused, Rest: Rest{Phase: PhasePaused, Files: &SavedFiles{}}}, PhasePaused},
		{Info{State: StatePaused, Rest: Rest{Phase: PhaseSpilling, Memory: &MemoryOnDisk{Dir: "d"}}}, PhaseSpilling},
		{Info{State: StatePaused, Rest: Rest{Phase: PhaseOnDisk, Memory: onDisk}}, PhaseOnDisk},
		{Info{State: StatePaused, Rest: Rest{Phase: PhaseFiles, Files: &SavedFiles{}}}, PhaseFiles},
		{Info{State: StateKilled, Rest: Rest{Phase: PhaseFiles, Files: &SavedFiles{}}}, PhaseKilled},
	} {
		if got := c.info.Phase(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.info, got, c.want)
		}
		if err := c.info.Rest.Check(c.info.State); c.info.State != "" && err != nil {
			t.Errorf("%+v: %v", c.info, err)
		}
	}
}

// TestRestParts: a rest has the parts its phase says, on a record whose
// state can have it; writeRecord refuses any other.
func TestRestParts(t *testing.T) {
	files, spilling, onDisk := &SavedFiles{}, &MemoryOnDisk{Dir: "d"}, &MemoryOnDisk{Dir: "d", Files: []template.FileSum{{}}}
	for _, c := range []struct {
		state State
		rest  Rest
	}{
		{StateRunning, Rest{Phase: PhaseSaving, Files: files}},
		{StatePaused, Rest{Phase: PhaseSaving}},
		{StatePaused, Rest{}},
		{StateRunning, Rest{Phase: PhasePaused}},
		{StateRunning, Rest{Files: files}},
		{StatePaused, Rest{Phase: PhasePaused, Memory: onDisk}},
		{StatePaused, Rest{Phase: PhaseSpilling}},
		{StatePaused, Rest{Phase: PhaseSpilling, Memory: onDisk}},
		{StatePaused, Rest{Phase: PhaseOnDisk, Memory: spilling}},
		{StatePaused, Rest{Phase: PhaseFiles}},
		{StatePaused, Rest{Phase: PhaseFiles, Files: files, Memory: onDisk}},
		{StatePaused, Rest{Phase: PhaseRunning}},
	} {
		if err := c.rest.Check(c.state); !errs.Is(err, errs.Internal) {
			t.Errorf("%s %+v: %v, want an internal error", c.state, c.rest, err)
		}
	}
}

// TestRecordBeforeRest: a record written before Rest, its parts loose
// fields, reads as the same phase with the same parts.
func TestRecordBeforeRest(t *testing.T) {
	for _, c := range []struct {
		record     string
		want       Phase
		files, mem bool
	}{
		{`{"id":"a","state":"running"}`, PhaseRunning, false, false},
		{`{"id":"a","state":"running","saving":true}`, PhaseSaving, false, false},
		{`{"id":"a","state":"paused"}`, PhasePaused, false, false},
		{`{"id":"a","state":"paused","fallback":{"layer":{"name":"l"}}}`, PhasePaused, true, false},
		{`{"id":"a","state":"paused","fallback":{"layer":{"name":"l"}},"spilled":{"dir":"d"}}`, PhaseSpilling, true, true},
		{`{"id":"a","state":"paused","spilled":{"dir":"d","files":[{"name":"p"}]}}`, PhaseOnDisk, false, true},
		{`{"id":"a","state":"paused","saved":{"layer":{"name":"l"},"blobs":{"l":"b"}},"ownLayer":"l"}`, PhaseFiles, true, false},
		{`{"id":"a","state":"paused","rest":{"phase":"paused as files","files":{"layer":{"name":"l"}}}}`, PhaseFiles, true, false},
	} {
		var info Info
		if err := json.Unmarshal([]byte(c.record), &info); err != nil {
			t.Fatalf("%s: %v", c.record, err)
		}
		if got := info.Phase(); got != c.want || (info.Rest.Files != nil) != c.files || (info.Rest.Memory != nil) != c.mem {
			t.Errorf("%s: %s %+v, want %s (files %t, memory %t)", c.record, got, info.Rest, c.want, c.files, c.mem)
		}
		if err := info.Rest.Check(info.State); err != nil {
			t.Errorf("%s: %v", c.record, err)
		}
		if info.ID != "a" {
			t.Errorf("%s: id %q: the record's own fields are lost", c.record, info.ID)
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
