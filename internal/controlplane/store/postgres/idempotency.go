package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// ClaimIdempotent implements store.Idempotency: in one transaction that
// holds the team's keys, whichever replica asks, the key is read, and
// taken only where nothing live holds it, past the team's bound once the
// team has room.
func (s *Store) ClaimIdempotent(ctx context.Context, r store.Idempotent, now time.Time) (store.Idempotent, bool, error) {
	held := store.Idempotent{Team: r.Team, Key: r.Key}
	claimed := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cove-idempotency:' || $1))`, r.Team); err != nil {
			return fmt.Errorf("lock team %s's idempotency keys: %w", r.Team, err)
		}
		err := tx.QueryRow(ctx, `SELECT sum, status, body, lease_until, expires FROM idempotency WHERE team = $1 AND key = $2`,
			r.Team, r.Key).Scan(&held.Sum, &held.Status, &held.Body, &held.LeaseUntil, &held.Expires)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if err := s.roomForKey(ctx, tx, r.Team, now); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("read idempotency key: %w", err)
		case store.IdempotentLive(held, now):
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO idempotency (team, key, sum, status, body, lease_until, expires)
			VALUES ($1, $2, $3, 0, NULL, $4, $5)
			ON CONFLICT (team, key) DO UPDATE SET sum = excluded.sum, status = 0, body = NULL,
				lease_until = excluded.lease_until, expires = excluded.expires`,
			r.Team, r.Key, r.Sum, r.LeaseUntil, r.Expires); err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		}
		claimed = true
		return nil
	})
	switch {
	case err != nil:
		return store.Idempotent{}, false, err
	case claimed:
		return r, true, nil
	}
	return held, false, nil
}

// roomForKey makes room in tx for one more of team's keys: when the team
// has its bound, its dead keys go, then its answered keys nearest their
// expiry.
func (s *Store) roomForKey(ctx context.Context, tx pgx.Tx, team string, now time.Time) error {
	count := func() (int, error) {
		var n int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM idempotency WHERE team = $1`, team).Scan(&n)
		return n, err
	}
	n, err := count()
	if err != nil {
		return fmt.Errorf("count team's idempotency keys: %w", err)
	}
	if n < s.limits.IdempotencyKeys {
		return nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM idempotency WHERE team = $1 AND (expires <= $2 OR (status = 0 AND lease_until <= $2))`,
		team, now); err != nil {
		return fmt.Errorf("drop team's dead idempotency keys: %w", err)
	}
	if n, err = count(); err != nil {
		return fmt.Errorf("count team's idempotency keys: %w", err)
	}
	over := n - s.limits.IdempotencyKeys + 1
	if over <= 0 {
		return nil
	}
	tag, err := tx.Exec(ctx, `DELETE FROM idempotency WHERE team = $1 AND key IN
		(SELECT key FROM idempotency WHERE team = $1 AND status <> 0 ORDER BY expires, key LIMIT $2)`, team, over)
	if err != nil {
		return fmt.Errorf("drop team's oldest idempotency keys: %w", err)
	}
	if tag.RowsAffected() < int64(over) {
		return store.ErrKeysInProgress(s.limits.IdempotencyKeys)
	}
	return nil
}

// FinishIdempotent implements store.Idempotency.
func (s *Store) FinishIdempotent(ctx context.Context, team string, a store.IdempotentAnswer) error {
	return finishIdempotent(ctx, s.pool, a, team)
}

// finishIdempotent records a claimed key's answer through db (the pool,
// or the transaction that records its sandbox).
func finishIdempotent(ctx context.Context, db execer, a store.IdempotentAnswer, team string) error {
	var expires *time.Time
	if !a.Expires.IsZero() {
		expires = &a.Expires
	}
	if _, err := db.Exec(ctx, `UPDATE idempotency SET status = $1, body = $2, expires = coalesce($3, expires)
		WHERE team = $4 AND key = $5 AND status = 0`, a.Status, a.Body, expires, team, a.Key); err != nil {
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
