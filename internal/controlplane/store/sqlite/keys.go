package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// TeamAPIKeys implements store.Store.
func (s *Store) TeamAPIKeys(ctx context.Context, team string) ([]store.APIKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT hash, name, created_at FROM api_keys WHERE team = ? ORDER BY created_at, hash`, team)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k := store.APIKey{Team: team}
		var created int64
		if err := rows.Scan(&k.Hash, &k.Name, &created); err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		k.CreatedAt = time.Unix(created, 0).UTC()
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// DeleteAPIKey implements store.Store.
func (s *Store) DeleteAPIKey(ctx context.Context, team, hash string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM api_keys WHERE team = ? AND hash = ?`, team, hash)
	if err != nil {
		return fmt.Errorf("delete api key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, "api key not found")
	}
	return nil
}
