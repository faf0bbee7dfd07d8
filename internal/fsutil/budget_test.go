package fsutil

import (
	"testing"

	"github.com/covesandbox/cove/internal/errs"
)

func TestBudget(t *testing.T) {
	dir := t.TempDir()
	team := &Budget{Max: 100, What: "the team's storage"}
	build := &Budget{Max: 60, Dir: dir, MinFree: 1, Parent: team}
	steps := []struct {
		name   string
		b      *Budget
		charge int64
		kind   errs.Kind // Internal: taken
		left   int64     // build.Left after
	}{
		{"within both", build, 50, errs.Internal, 10},
		{"past the build's own", build, 20, errs.QuotaExceeded, 1},
		{"the team's, from another job", team, 40, errs.QuotaExceeded, 1},
		{"no Max: the floor alone", &Budget{Dir: dir, MinFree: 1}, 1 << 20, errs.Internal, 1},
		{"a floor the disk cannot keep", &Budget{Dir: dir, MinFree: 1 << 62}, 1, errs.ResourceExhausted, 1},
		{"nil charges nothing", nil, 1 << 40, errs.Internal, 1},
	}
	for _, s := range steps {
		err := s.b.Charge(s.charge)
		switch {
		case s.kind == errs.Internal && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.kind != errs.Internal && !errs.Is(err, s.kind):
			t.Errorf("%s: %v, want %v", s.name, err, s.kind)
		}
		if got := build.Left(); got != s.left {
			t.Errorf("%s: Left = %d, want %d", s.name, got, s.left)
		}
	}
	if (&Budget{}).Left() != 0 {
		t.Error("a budget without Max has a Left")
	}
}
