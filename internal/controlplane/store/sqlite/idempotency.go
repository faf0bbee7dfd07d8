package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// ClaimIdempotent implements store.Idempotency: one statement, which
// takes the key only where nothing live holds it.
func (s *Store) ClaimIdempotent(ctx context.Context, r store.Idempotent, now time.Time) (store.Idempotent, bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO idempotency (team, key, sum, status, body, lease_until, expires)
		VALUES (?, ?, ?, 0, NULL, ?, ?)
		ON CONFLICT (team, key) DO UPDATE SET sum = excluded.sum, status = 0, body = NULL,
			lease_until = excluded.lease_until, expires = excluded.expires
		WHERE idempotency.expires <= ? OR (idempotency.status = 0 AND idempotency.lease_until <= ?)`,
		r.Team, r.Key, r.Sum, r.LeaseUntil.UnixNano(), r.Expires.UnixNano(), now.UnixNano(), now.UnixNano())
	if err != nil {
		return store.Idempotent{}, false, fmt.Errorf("claim idempotency key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return r, true, nil
	}
	held := store.Idempotent{Team: r.Team, Key: r.Key}
	var lease, expires int64
	err = s.db.QueryRowContext(ctx, `SELECT sum, status, body, lease_until, expires FROM idempotency WHERE team = ? AND key = ?`,
		r.Team, r.Key).Scan(&held.Sum, &held.Status, &held.Body, &lease, &expires)
	if errors.Is(err, sql.ErrNoRows) { // pruned meanwhile: try again
		return s.ClaimIdempotent(ctx, r, now)
	}
	if err != nil {
		return store.Idempotent{}, false, fmt.Errorf("read idempotency key: %w", err)
	}
	held.LeaseUntil, held.Expires = time.Unix(0, lease), time.Unix(0, expires)
	return held, false, nil
}

// FinishIdempotent implements store.Idempotency.
func (s *Store) FinishIdempotent(ctx context.Context, team, key string, status int, body []byte) error {
	return finishIdempotent(ctx, s.db, store.IdempotentAnswer{Key: key, Status: status, Body: body}, team)
}

// finishIdempotent records a claimed key's answer through db (the store,
// or the transaction that records its sandbox).
func finishIdempotent(ctx context.Context, db execer, a store.IdempotentAnswer, team string) error {
	if _, err := db.ExecContext(ctx, `UPDATE idempotency SET status = ?, body = ? WHERE team = ? AND key = ? AND status = 0`,
		a.Status, a.Body, team, a.Key); err != nil {
		return fmt.Errorf("record the answer of idempotency key: %w", err)
	}
	return nil
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
