package node

import (
	"errors"
	"testing"
	"time"
)

func TestWarmBackoff(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	f := warmFailures{}
	boom := errors.New("start failed")
	steps := []struct {
		at        time.Duration // when the failure happens
		wantRetry time.Duration // the next attempt's earliest time, from t0
		gaveUp    bool
	}{
		{0, 1 * time.Second, false},
		{1 * time.Second, 3 * time.Second, false},
		{3 * time.Second, 7 * time.Second, false},
		{7 * time.Second, 15 * time.Second, false},
		{15 * time.Second, 31 * time.Second, false},
		{31 * time.Second, 63 * time.Second, true},
	}
	for i, s := range steps {
		if !f.ready("t", "b1", t0.Add(s.at)) {
			t.Fatalf("step %d: not ready at %v", i, s.at)
		}
		if gaveUp := f.fail("t", "b1", boom, t0.Add(s.at)); gaveUp != s.gaveUp {
			t.Errorf("step %d: gave up %v, want %v", i, gaveUp, s.gaveUp)
		}
		if !s.gaveUp {
			if f.ready("t", "b1", t0.Add(s.wantRetry-time.Millisecond)) || !f.ready("t", "b1", t0.Add(s.wantRetry)) {
				t.Errorf("step %d: retry not at %v", i, s.wantRetry)
			}
			if got := f.next(); !got.Equal(t0.Add(s.wantRetry)) {
				t.Errorf("step %d: next %v, want %v", i, got.Sub(t0), s.wantRetry)
			}
		}
	}
	if f.ready("t", "b1", t0.Add(time.Hour)) || !f.next().IsZero() {
		t.Error("a given-up build is warmed again")
	}
	if !f.ready("t", "b2", t0.Add(time.Hour)) {
		t.Error("a new build of the template is not warmed")
	}
	if !f.ready("other", "b1", t0) {
		t.Error("another template is held back")
	}
}
