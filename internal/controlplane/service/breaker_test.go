package service

import (
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	var b breaker
	t0 := time.Unix(1000, 0)
	steps := []struct {
		name  string
		at    time.Duration
		fail  bool // the attempt allowed at this step fails
		allow bool
	}{
		{"first failures pass", 0, true, true},
		{"", 1 * time.Second, true, true},
		{"", 2 * time.Second, true, true},
		{"", 3 * time.Second, true, true},
		{"the fifth opens it", 4 * time.Second, true, true},
		{"open: held back", 5 * time.Second, false, false},
		{"still within the cool-down", 33 * time.Second, false, false},
		{"after it: one attempt, which fails", 35 * time.Second, true, true},
		{"a doubled cool-down", 60 * time.Second, false, false},
		{"after it: one attempt, which succeeds", 96 * time.Second, false, true},
		{"closed again", 97 * time.Second, false, true},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		got := b.allow("w", now)
		if got != s.allow {
			t.Fatalf("step %d (%s): allow = %v, want %v", i, s.name, got, s.allow)
		}
		if got {
			b.done("w", !s.fail, now)
		}
	}
	if !b.allow("other", t0) {
		t.Error("another webhook is held back")
	}
}
