package service

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/logx"
)

// IdempotencyLease bounds a create that holds an Idempotency-Key: it runs
// at most this long, and a record still in progress after it is taken to
// have died with its API process (another replica may then run the
// create again).
const IdempotencyLease = 10 * time.Minute

// Keyed is what a create with an Idempotency-Key records with its
// sandbox, in the same transaction: the answer a replay gets.
type Keyed struct {
	Key string
	// Answer renders the create's answer (201's body) for its sandbox.
	Answer func(Sandbox) []byte
}

// ClaimCreate claims team's key for a create whose request hashes to sum
// (store.Idempotency): claimed, or the record that holds the key. A
// team keeps store.Limits.IdempotencyKeys keys: past them its answered
// keys nearest their end go first.
func (s *Service) ClaimCreate(ctx context.Context, team, key, sum string) (store.Idempotent, bool, error) {
	now := s.now()
	return s.store.ClaimIdempotent(ctx, store.Idempotent{Team: team, Key: key, Sum: sum,
		LeaseUntil: now.Add(IdempotencyLease), Expires: now.Add(store.IdempotencyKept)}, now)
}

// FinishCreate records the answer of a claimed key's create that failed
// for good: its replays get the same for store.IdempotencyFailureKept
// (a success's, recorded with its sandbox, are kept a day).
func (s *Service) FinishCreate(ctx context.Context, team, key string, status int, body []byte) error {
	return s.store.FinishIdempotent(ctx, team, store.IdempotentAnswer{Key: key, Status: status, Body: body,
		Expires: s.now().Add(store.IdempotencyFailureKept)})
}

// ReleaseCreate forgets a claimed key whose create failed in a way that
// may pass when tried again.
func (s *Service) ReleaseCreate(ctx context.Context, team, key string) error {
	return s.store.ReleaseIdempotent(ctx, team, key)
}

// pruneIdempotent drops the keys kept past their time.
func (s *Service) pruneIdempotent(ctx context.Context) {
	if err := s.store.PruneIdempotent(ctx, s.now()); err != nil && ctx.Err() == nil {
		s.log.Warn("prune idempotency keys", logx.Err(err))
	}
}
