package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// TeamAPIKeys implements store.Store.
func (s *Store) TeamAPIKeys(ctx context.Context, team string) ([]store.APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT hash, name, created_at FROM api_keys WHERE team = $1 ORDER BY created_at, hash`, team)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.APIKey, error) {
		k := store.APIKey{Team: team}
		err := r.Scan(&k.Hash, &k.Name, &k.CreatedAt)
		k.CreatedAt = k.CreatedAt.UTC()
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// DeleteAPIKey implements store.Store.
func (s *Store) DeleteAPIKey(ctx context.Context, team, hash string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM api_keys WHERE team = $1 AND hash = $2`, team, hash)
	if err != nil {
		return fmt.Errorf("delete api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errs.New(errs.NotFound, "api key not found")
	}
	return nil
}
