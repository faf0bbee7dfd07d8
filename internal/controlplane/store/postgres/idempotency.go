package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// ClaimIdempotent implements store.Idempotency: one statement, which
// takes the key only where nothing live holds it, whichever replica asks.
func (s *Store) ClaimIdempotent(ctx context.Context, r store.Idempotent, now time.Time) (store.Idempotent, bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO idempotency (team, key, sum, status, body, lease_until, expires)
		VALUES ($1, $2, $3, 0, NULL, $4, $5)
		ON CONFLICT (team, key) DO UPDATE SET sum = excluded.sum, status = 0, body = NULL,
			lease_until = excluded.lease_until, expires = excluded.expires
		WHERE idempotency.expires <= $6 OR (idempotency.status = 0 AND idempotency.lease_until <= $6)`,
		r.Team, r.Key, r.Sum, r.LeaseUntil, r.Expires, now)
	if err != nil {
		return store.Idempotent{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return r, true, nil
	}
	held := store.Idempotent{Team: r.Team, Key: r.Key}
	err = s.pool.QueryRow(ctx, `SELECT sum, status, body, lease_until, expires FROM idempotency WHERE team = $1 AND key = $2`,
		r.Team, r.Key).Scan(&held.Sum, &held.Status, &held.Body, &held.LeaseUntil, &held.Expires)
	if errors.Is(err, pgx.ErrNoRows) { // pruned meanwhile: try again
		return s.ClaimIdempotent(ctx, r, now)
	}
	if err != nil {
		return store.Idempotent{}, false, fmt.Errorf("read idempotency key: %w", err)
	}
	return held, false, nil
}

// FinishIdempotent implements store.Idempotency.
func (s *Store) FinishIdempotent(ctx context.Context, team, key string, status int, body []byte) error {
	return finishIdempotent(ctx, s.pool, store.IdempotentAnswer{Key: key, Status: status, Body: body}, team)
}

// finishIdempotent records a claimed key's answer through db (the pool,
// or the transaction that records its sandbox).
func finishIdempotent(ctx context.Context, db execer, a store.IdempotentAnswer, team string) error {
	if _, err := db.Exec(ctx, `UPDATE idempotency SET status = $1, body = $2 WHERE team = $3 AND key = $4 AND status = 0`,
		a.Status, a.Body, team, a.Key); err != nil {
		return fmt.Errorf("record the answer of idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotent implements store.Idempotency.
func (s *Store) ReleaseIdempotent(ctx context.Context, team, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE team = $1 AND key = $2 AND status = 0`, team, key); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// AbandonIdempotent implements store.Idempotency.
func (s *Store) AbandonIdempotent(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE status = 0`); err != nil {
		return fmt.Errorf("abandon idempotency keys: %w", err)
	}
	return nil
}

// PruneIdempotent implements store.Idempotency.
func (s *Store) PruneIdempotent(ctx context.Context, before time.Time) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE expires <= $1`, before); err != nil {
		return fmt.Errorf("prune idempotency keys: %w", err)
	}
	return nil
}
