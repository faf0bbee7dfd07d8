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

// TestBudgetReserve: a reservation is taken whole or not at all, from the
// budget and its parent, and a refund gives it back.
func TestBudgetReserve(t *testing.T) {
	t.Parallel()
	team := &Budget{Max: 100}
	job := &Budget{Max: 80, Parent: team}
	steps := []struct {
		name              string
		b                 *Budget
		n                 int64
		taken             bool
		teamUsed, jobUsed int64
	}{
		{"within both", job, 60, true, 60, 60},
		{"past the job's own", job, 30, false, 60, 60},
		{"past the team's, from another job", team, 50, false, 60, 60},
		{"what the team leaves", team, 40, true, 100, 60},
		{"nothing left", job, 1, false, 100, 60},
	}
	for _, s := range steps {
		err := s.b.Reserve(s.n)
		if s.taken != (err == nil) || (err != nil && !errs.Is(err, errs.QuotaExceeded)) {
			t.Errorf("%s: %v", s.name, err)
		}
		if team.Used() != s.teamUsed || job.Used() != s.jobUsed {
			t.Errorf("%s: team %d, job %d used; want %d, %d", s.name, team.Used(), job.Used(), s.teamUsed, s.jobUsed)
		}
	}
	job.Refund(60)
	if team.Used() != 40 || job.Used() != 0 {
		t.Errorf("after the refund: team %d, job %d used", team.Used(), job.Used())
	}
	if err := (*Budget)(nil).Reserve(1 << 40); err != nil {
		t.Errorf("nil: %v", err)
	}
}
