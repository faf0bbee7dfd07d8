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
}

// DefaultLimits are a store's until SetLimits.
var DefaultLimits = Limits{IdempotencyKeys: 10_000, Events: 100_000, EventBytes: 64 << 20}
