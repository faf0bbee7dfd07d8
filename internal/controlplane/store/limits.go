package store

// Limits bound what one team's requests keep in the database, besides
// how long each record is kept: a loop of requests, however long it runs,
// keeps at most this much of a team's.
type Limits struct {
	// IdempotencyKeys is how many Idempotency-Keys a team keeps. A claim
	// past it drops the team's answered keys nearest their expiry first
	// (failures, kept IdempotencyFailureKept, before successes); with
	// none answered, every key in progress, it is QuotaExceeded.
	IdempotencyKeys int
	// Events and EventBytes bound a team's lifecycle events: their rows,
	// and their bytes with the sandbox metadata they name (kept once per
	// team and content). Past either, the oldest events go first.
	Events     int
	EventBytes int64
	// LogLines and LogBytes bound the lines of a team's sandboxes'
	// lifecycle logs (message and fields); past either, the oldest go
	// first.
	LogLines int
	LogBytes int64
	// Deliveries bounds the deliveries a team's webhooks have waiting
	// (their receivers failing or held back); past it the oldest events'
	// are given up first.
	Deliveries int
}

// DefaultLimits are a store's until SetLimits, and where its Limits
// leave a field 0.
var DefaultLimits = Limits{IdempotencyKeys: 10_000, Events: 100_000, EventBytes: 64 << 20, LogLines: 100_000, LogBytes: 32 << 20, Deliveries: 10_000}

// OrDefault is l with DefaultLimits' in place of its fields that are 0.
func (l Limits) OrDefault() Limits {
	d := DefaultLimits
	for _, f := range []struct{ to, from *int }{{&l.IdempotencyKeys, &d.IdempotencyKeys}, {&l.Events, &d.Events}, {&l.LogLines, &d.LogLines}, {&l.Deliveries, &d.Deliveries}} {
		if *f.to <= 0 {
			*f.to = *f.from
		}
	}
	for _, f := range []struct{ to, from *int64 }{{&l.EventBytes, &d.EventBytes}, {&l.LogBytes, &d.LogBytes}} {
		if *f.to <= 0 {
			*f.to = *f.from
		}
	}
	return l
}
