package store

import (
	"context"
	"time"
)

// Idempotent is a create its team sent with an Idempotency-Key (E2B's
// SDKs from 2.61), kept for IdempotencyKept: what was asked (Sum, a hash
// of the request) and, once it ended, what was answered. Every API
// replica of a cluster reads the same records.
type Idempotent struct {
	Team, Key string
	Sum       string
	// Status is the answer's HTTP status: 0 while the create runs.
	Status int
	Body   []byte
	// LeaseUntil is when a create in progress is taken to have died with
	// its API process, and another may run in its place.
	LeaseUntil time.Time
	Expires    time.Time
}

// IdempotentAnswer is the answer a create records with its sandbox, in
// the same transaction: no crash leaves a recorded sandbox whose key has
// no answer to replay.
type IdempotentAnswer struct {
	Key    string
	Status int
	Body   []byte
}

// IdempotencyKept is how long a key and its answer are kept.
const IdempotencyKept = 24 * time.Hour

// Idempotency keeps keyed creates (part of Store).
type Idempotency interface {
	// ClaimIdempotent claims r's key for its team, recording r as in
	// progress: claimed when no live record held the key (none, one
	// expired, or one in progress past its lease); else the record that
	// holds it.
	ClaimIdempotent(ctx context.Context, r Idempotent, now time.Time) (held Idempotent, claimed bool, err error)
	// FinishIdempotent records the answer of a claimed key's create.
	FinishIdempotent(ctx context.Context, team, key string, status int, body []byte) error
	// ReleaseIdempotent forgets a claimed key whose create may run again.
	ReleaseIdempotent(ctx context.Context, team, key string) error
	// AbandonIdempotent forgets every create in progress: a single
	// server's, at its start, which its process did not live to finish.
	AbandonIdempotent(ctx context.Context) error
	// PruneIdempotent removes the records that expired before.
	PruneIdempotent(ctx context.Context, before time.Time) error
}
