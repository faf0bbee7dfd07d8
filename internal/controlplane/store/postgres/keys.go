package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// AddAPIKey implements store.Store.
func (s *Store) AddAPIKey(ctx context.Context, k store.APIKey) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO teams (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT DO NOTHING`, k.Team, k.CreatedAt); err != nil {
			return fmt.Errorf("add api key's team: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO api_keys (hash, team, name, created_at, mask) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (hash) DO NOTHING`, k.Hash, k.Team, k.Name, k.CreatedAt, k.Mask); err != nil {
			return fmt.Errorf("add api key: %w", err)
		}
		return nil
	})
}

const keyColumns = `hash, team, name, created_at, mask, last_used`

func scanKey(row pgx.Row) (store.APIKey, error) {
	var k store.APIKey
	var used *time.Time
	if err := row.Scan(&k.Hash, &k.Team, &k.Name, &k.CreatedAt, &k.Mask, &used); err != nil {
		return k, err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	if used != nil {
		k.LastUsed = used.UTC()
	}
	return k, nil
}

// APIKey implements store.Store.
func (s *Store) APIKey(ctx context.Context, hash string) (store.APIKey, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return k, errs.New(errs.NotFound, "api key not found")
	}
	if err != nil {
		return k, fmt.Errorf("look up api key: %w", err)
	}
	return k, nil
}

// CountAPIKeys implements store.Store.
func (s *Store) CountAPIKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count api keys: %w", err)
	}
	return n, nil
}

// TeamAPIKeys implements store.Store.
func (s *Store) TeamAPIKeys(ctx context.Context, team string) ([]store.APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE team = $1 ORDER BY created_at, hash`, team)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.APIKey, error) { return scanKey(r) })
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// DeleteAPIKey implements store.Store.
func (s *Store) DeleteAPIKey(ctx context.Context, team, hash string) error {
	return s.changeKey(ctx, `DELETE FROM api_keys WHERE team = $1 AND hash = $2`, team, hash)
}

// RenameAPIKey implements store.Store.
func (s *Store) RenameAPIKey(ctx context.Context, team, hash, name string) error {
	return s.changeKey(ctx, `UPDATE api_keys SET name = $3 WHERE team = $1 AND hash = $2`, team, hash, name)
}

// changeKey runs a statement on one key: NotFound when it changes none.
func (s *Store) changeKey(ctx context.Context, q string, args ...any) error {
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("change api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errs.New(errs.NotFound, "api key not found")
	}
	return nil
}

// TouchAPIKey implements store.Store.
func (s *Store) TouchAPIKey(ctx context.Context, hash string, t time.Time) error {
	if _, err := s.pool.Exec(ctx, `UPDATE api_keys SET last_used = $2 WHERE hash = $1`, hash, t); err != nil {
		return fmt.Errorf("touch api key: %w", err)
	}
	return nil
}
