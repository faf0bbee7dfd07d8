package service

import (
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/sandboxes"
)

// TestTeamMetricsSample: a team's sample counts its running sandboxes,
// and as started those new since the sample before — seen by the nodes,
// or created here and gone before the sample.
func TestTeamMetricsSample(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sb := func(id, team string, state sandboxes.State, started int) sandboxes.Info {
		return sandboxes.Info{ID: id, Team: team, State: state, StartedAt: at(started)}
	}
	tm := newTeamMetrics()
	tm.sample([]sandboxes.Info{sb("a", "t1", sandboxes.StateRunning, -10)}, at(0)) // the first: no rate
	tm.created("t1", "short")                                                      // made and gone between samples
	tm.created("t1", "a")                                                          // its create returned after the sample that saw it
	tm.sample([]sandboxes.Info{
		sb("a", "t1", sandboxes.StateRunning, -10), sb("b", "t1", sandboxes.StateRunning, 2), sb("c", "t1", sandboxes.StatePaused, 3),
		sb("d", "t2", sandboxes.StateRunning, 4), {ID: "w", State: sandboxes.StateRunning, StartedAt: at(4)}, // warm: no team
	}, at(5))
	tm.sample([]sandboxes.Info{sb("b", "t1", sandboxes.StateRunning, 2)}, at(10))
	for _, tc := range []struct {
		team string
		want []TeamMetric
	}{
		{"t1", []TeamMetric{{at(0), 1, 0}, {at(5), 2, 3.0 / 5}, {at(10), 1, 0}}},
		{"t2", []TeamMetric{{at(5), 1, 1.0 / 5}, {at(10), 0, 0}}},
		{"t3", nil},
	} {
		got := tm.between(tc.team, time.Time{}, time.Time{})
		if len(got) != len(tc.want) {
			t.Fatalf("team %s: %+v, want %+v", tc.team, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("team %s sample %d: %+v, want %+v", tc.team, i, got[i], tc.want[i])
			}
		}
	}
	if got := tm.between("t1", at(4), at(9)); len(got) != 1 || !got[0].At.Equal(at(5)) {
		t.Errorf("t1 from 4 s to 9 s: %+v", got)
	}
}
