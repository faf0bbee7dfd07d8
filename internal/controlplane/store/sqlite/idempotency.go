package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// ClaimIdempotent implements store.Idempotency: in one transaction, the
// key is read, and taken only where nothing live holds it, past the
// team's bound once the team has room.
func (s *Store) ClaimIdempotent(ctx context.Context, r store.Idempotent, now time.Time) (store.Idempotent, bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Idempotent{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	defer tx.Rollback()
	held := store.Idempotent{Team: r.Team, Key: r.Key}
	var lease, expires int64
	err = tx.QueryRowContext(ctx, `SELECT sum, status, body, lease_until, expires FROM idempotency WHERE team = ? AND key = ?`,
		r.Team, r.Key).Scan(&held.Sum, &held.Status, &held.Body, &lease, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if err := s.roomForKey(ctx, tx, r.Team, now); err != nil {
			return store.Idempotent{}, false, err
		}
	case err != nil:
		return store.Idempotent{}, false, fmt.Errorf("read idempotency key: %w", err)
	default:
		held.LeaseUntil, held.Expires = time.Unix(0, lease), time.Unix(0, expires)
		if store.IdempotentLive(held, now) {
			return held, false, nil
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency (team, key, sum, status, body, lease_until, expires)
		VALUES (?, ?, ?, 0, NULL, ?, ?)
		ON CONFLICT (team, key) DO UPDATE SET sum = excluded.sum, status = 0, body = NULL,
			lease_until = excluded.lease_until, expires = excluded.expires`,
		r.Team, r.Key, r.Sum, r.LeaseUntil.UnixNano(), r.Expires.UnixNano()); err != nil {
		return store.Idempotent{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return store.Idempotent{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	return r, true, nil
}

// roomForKey makes room in tx for one more of team's keys: when the team
// has its bound, its dead keys go, then its answered keys nearest their
// expiry.
func (s *Store) roomForKey(ctx context.Context, tx *sql.Tx, team string, now time.Time) error {
	count := func() (int, error) {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM idempotency WHERE team = ?`, team).Scan(&n)
		return n, err
	}
	n, err := count()
	if err != nil {
		return fmt.Errorf("count team's idempotency keys: %w", err)
	}
	if n < s.limits.IdempotencyKeys {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE team = ? AND (expires <= ? OR (status = 0 AND lease_until <= ?))`,
		team, now.UnixNano(), now.UnixNano()); err != nil {
		return fmt.Errorf("drop team's dead idempotency keys: %w", err)
	}
	if n, err = count(); err != nil {
		return fmt.Errorf("count team's idempotency keys: %w", err)
	}
	over := n - s.limits.IdempotencyKeys + 1
	if over <= 0 {
		return nil
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE rowid IN
		(SELECT rowid FROM idempotency WHERE team = ? AND status <> 0 ORDER BY expires, key LIMIT ?)`, team, over)
	if err != nil {
		return fmt.Errorf("drop team's oldest idempotency keys: %w", err)
	}
	if dropped, _ := res.RowsAffected(); dropped < int64(over) {
		return store.ErrKeysInProgress(s.limits.IdempotencyKeys)
	}
	return nil
}

// FinishIdempotent implements store.Idempotency.
func (s *Store) FinishIdempotent(ctx context.Context, team string, a store.IdempotentAnswer) error {
	return finishIdempotent(ctx, s.db, a, team)
}

// finishIdempotent records a claimed key's answer through db (the store,
// or the transaction that records its sandbox).
func finishIdempotent(ctx context.Context, db execer, a store.IdempotentAnswer, team string) error {
	if _, err := db.ExecContext(ctx, `UPDATE idempotency SET status = ?, body = ?, expires = coalesce(?, expires)
		WHERE team = ? AND key = ? AND status = 0`, a.Status, a.Body, nullTime(a.Expires), team, a.Key); err != nil {
		return fmt.Errorf("record the answer of idempotency key: %w", err)
	}
	return nil
}

// nullTime is t in Unix nanoseconds, NULL when zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// ReleaseIdempotent implements store.Idempotency.
func (s *Store) ReleaseIdempotent(ctx context.Context, team, key string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotency WHERE team = ? AND key = ? AND status = 0`, team, key); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// AbandonIdempotent implements store.Idempotency.
func (s *Store) AbandonIdempotent(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotency WHERE status = 0`); err != nil {
		return fmt.Errorf("abandon idempotency keys: %w", err)
	}
	return nil
}

// PruneIdempotent implements store.Idempotency.
func (s *Store) PruneIdempotent(ctx context.Context, before time.Time) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotency WHERE expires <= ?`, before.UnixNano()); err != nil {
		return fmt.Errorf("prune idempotency keys: %w", err)
	}
	return nil
}
