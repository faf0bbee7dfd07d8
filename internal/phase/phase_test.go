package phase

import (
	"context"
	"slices"
	"testing"
	"time"
)

type recorded struct {
	ops, phases []string
	total       time.Duration
}

func (r *recorded) Phase(op, phase string, d time.Duration) {
	r.ops = append(r.ops, op)
	r.phases = append(r.phases, phase)
	r.total += d
}

func TestMarks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rec   *recorded
		marks []string
	}{
		{"each mark is a phase, in order", &recorded{}, []string{"admit", "network", "spawn"}},
		{"no recorder: marks do nothing", nil, []string{"admit"}},
		{"no marks", &recorded{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec Recorder
			if tc.rec != nil {
				rec = tc.rec
			}
			began := time.Now()
			ctx := Start(context.Background(), rec, "create")
			for _, m := range tc.marks {
				time.Sleep(time.Millisecond)
				Mark(ctx, m)
			}
			elapsed := time.Since(began)
			if tc.rec == nil {
				if ctx.Value(key{}) != nil {
					t.Error("a timer without a recorder")
				}
				return
			}
			if !slices.Equal(tc.rec.phases, tc.marks) {
				t.Errorf("phases %v, want %v", tc.rec.phases, tc.marks)
			}
			for _, op := range tc.rec.ops {
				if op != "create" {
					t.Errorf("op %q", op)
				}
			}
			// The phases partition the operation: together no longer than it.
			if tc.rec.total > elapsed || (len(tc.marks) > 0 && tc.rec.total < time.Duration(len(tc.marks))*time.Millisecond) {
				t.Errorf("phases add up to %v of %v", tc.rec.total, elapsed)
			}
		})
	}
}
