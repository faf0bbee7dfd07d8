package store

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/errs"
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
	// Expires, when set, is when the answer goes (else the claim's
	// Expires): a failure's is sooner than a success's.
	Expires time.Time
}

// IdempotencyKept is how long a key and its answer are kept (E2B's day).
const IdempotencyKept = 24 * time.Hour

// IdempotencyFailureKept is how long a failure's answer is kept: long
// enough for the client's retries to get it again, not a day.
const IdempotencyFailureKept = 10 * time.Minute

// Idempotency keeps keyed creates (part of Store).
type Idempotency interface {
	// ClaimIdempotent claims r's key for its team, recording r as in
	// progress: claimed when no live record held the key (none, one
	// expired, or one in progress past its lease); else the record that
	// holds it. A team keeps at most Limits.IdempotencyKeys keys: a new
	// one past it drops the answered keys nearest their expiry, or is
	// QuotaExceeded when every key the team holds is in progress.
	ClaimIdempotent(ctx context.Context, r Idempotent, now time.Time) (held Idempotent, claimed bool, err error)
	// FinishIdempotent records the answer of a claimed key's create.
	FinishIdempotent(ctx context.Context, team string, a IdempotentAnswer) error
	// ReleaseIdempotent forgets a claimed key whose create may run again.
	ReleaseIdempotent(ctx context.Context, team, key string) error
	// AbandonIdempotent forgets every create in progress: a single
	// server's, at its start, which its process did not live to finish.
	AbandonIdempotent(ctx context.Context) error
	// PruneIdempotent removes the records that expired before.
	PruneIdempotent(ctx context.Context, before time.Time) error
}

// IdempotentLive is whether r still holds its key at now: not expired,
// and answered or within its lease.
func IdempotentLive(r Idempotent, now time.Time) bool {
	return r.Expires.After(now) && (r.Status != 0 || r.LeaseUntil.After(now))
}

// ErrKeysInProgress is a claim's error when each of the max keys its
// team may hold is held by a create in progress, so that none may go.
func ErrKeysInProgress(max int) error {
	return errs.Retryable(errs.New(errs.QuotaExceeded,
		"team quota: the team's %d Idempotency-Keys are all held by creates in progress; retry when one ends", max), 5*time.Second, "")
}
