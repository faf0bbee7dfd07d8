package service

import (
	"sync"
	"time"
)

// breaker holds back deliveries to webhooks whose receiver keeps failing:
// after breakerTrips failed attempts in a row a webhook's deliveries wait
// (claimed, due again at their lease's end) for a cool-down that doubles
// from breakerCool up to breakerMaxCool at each failure after it; once it
// has passed, one attempt goes through, and a success closes it. Each
// replica keeps its own (what it saw of its own attempts).
type breaker struct {
	mu    sync.Mutex
	hooks map[string]*hookHealth // by webhook id; only those failing
}

type hookHealth struct {
	fails    int
	openTill time.Time
	trying   bool // the attempt after the cool-down is out
}

const (
	breakerTrips   = 5
	breakerCool    = 30 * time.Second
	breakerMaxCool = 10 * time.Minute
)

// allow says whether a delivery to webhook may be attempted now.
func (b *breaker) allow(webhook string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.hooks[webhook]
	switch {
	case h == nil || h.fails < breakerTrips:
		return true
	case h.trying || now.Before(h.openTill):
		return false
	}
	h.trying = true
	return true
}

// done records an attempt's outcome.
func (b *breaker) done(webhook string, ok bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		delete(b.hooks, webhook)
		return
	}
	if b.hooks == nil {
		b.hooks = map[string]*hookHealth{}
	}
	h := b.hooks[webhook]
	if h == nil {
		h = &hookHealth{}
		b.hooks[webhook] = h
	}
	h.fails++
	h.trying = false
	if h.fails >= breakerTrips {
		h.openTill = now.Add(min(breakerCool<<(h.fails-breakerTrips), breakerMaxCool))
	}
}
