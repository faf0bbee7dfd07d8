package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

var _ store.StorageHolds = (*Store)(nil)

// dbNow is the database's time in unix nanoseconds: the replicas' clocks
// may differ, a hold's end is the database's.
const dbNow = `(extract(epoch FROM clock_timestamp()) * 1e9)::bigint`

// HoldStorage implements store.StorageHolds: a team's holds take a
// transaction's lock of their own, as its creates do.
func (s *Store) HoldStorage(ctx context.Context, team, id string, n int64, ttl time.Duration, gen int64, admit func(held int64) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cove-storage:' || $1))`, team); err != nil {
			return fmt.Errorf("lock team %s's storage: %w", team, err)
		}
		var now, held int64
		if err := tx.QueryRow(ctx, `SELECT `+dbNow).Scan(&now); err != nil {
			return fmt.Errorf("the database's time: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(bytes), 0) FROM storage_holds WHERE team = $1 AND id <> $2 AND expires_at > $3`,
			team, id, now).Scan(&held); err != nil {
			return fmt.Errorf("team %s's storage holds: %w", team, err)
		}
		// Read after the holds: a snapshot's record is written before its
		// hold goes, so one whose hold is gone is in a later generation.
		var current int64
		if err := tx.QueryRow(ctx, `SELECT generation FROM templates_generation`).Scan(&current); err != nil {
			return fmt.Errorf("read the templates' generation: %w", err)
		}
		if current != gen {
			return store.ErrRecordsChanged
		}
		if err := admit(held); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO storage_holds (id, team, bytes, expires_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET bytes = EXCLUDED.bytes, expires_at = EXCLUDED.expires_at`,
			id, team, n, now+int64(ttl)); err != nil {
			return fmt.Errorf("hold team %s's storage: %w", team, err)
		}
		// The expired holds of replicas that died go with the next hold.
		if _, err := tx.Exec(ctx, `DELETE FROM storage_holds WHERE team = $1 AND expires_at <= $2`, team, now); err != nil {
			return fmt.Errorf("remove team %s's expired storage holds: %w", team, err)
		}
		return nil
	})
}

// ReleaseStorage implements store.StorageHolds.
func (s *Store) ReleaseStorage(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM storage_holds WHERE id = $1`, id); err != nil {
		return fmt.Errorf("release storage hold %s: %w", id, err)
	}
	return nil
}
