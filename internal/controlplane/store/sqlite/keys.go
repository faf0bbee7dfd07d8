package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// AddAPIKey implements store.Store.
func (s *Store) AddAPIKey(ctx context.Context, k store.APIKey) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add api key: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO teams (id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		k.Team, k.Team, k.CreatedAt.Unix()); err != nil {
		return fmt.Errorf("add api key's team: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO api_keys (hash, team, name, created_at, mask) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (hash) DO NOTHING`, k.Hash, k.Team, k.Name, k.CreatedAt.Unix(), k.Mask); err != nil {
		return fmt.Errorf("add api key: %w", err)
	}
	return tx.Commit()
}

const keyColumns = `hash, team, name, created_at, mask, last_used`

func scanKey(row interface{ Scan(...any) error }) (store.APIKey, error) {
	var k store.APIKey
	var created, used int64
	if err := row.Scan(&k.Hash, &k.Team, &k.Name, &created, &k.Mask, &used); err != nil {
		return k, err
	}
	k.CreatedAt = time.Unix(created, 0).UTC()
	if used != 0 {
		k.LastUsed = time.Unix(used, 0).UTC()
	}
	return k, nil
}

// APIKey implements store.Store.
func (s *Store) APIKey(ctx context.Context, hash string) (store.APIKey, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
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
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count api keys: %w", err)
	}
	return n, nil
}

// TeamAPIKeys implements store.Store.
func (s *Store) TeamAPIKeys(ctx context.Context, team string) ([]store.APIKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE team = ? ORDER BY created_at, hash`, team)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// DeleteAPIKey implements store.Store.
func (s *Store) DeleteAPIKey(ctx context.Context, team, hash string) error {
	return s.changeKey(ctx, `DELETE FROM api_keys WHERE team = ? AND hash = ?`, team, hash)
}

// RenameAPIKey implements store.Store.
func (s *Store) RenameAPIKey(ctx context.Context, team, hash, name string) error {
	return s.changeKey(ctx, `UPDATE api_keys SET name = ? WHERE team = ? AND hash = ?`, name, team, hash)
}

// changeKey runs a statement on one key: NotFound when it changes none.
func (s *Store) changeKey(ctx context.Context, q string, args ...any) error {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("change api key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, "api key not found")
	}
	return nil
}

// TouchAPIKey implements store.Store.
func (s *Store) TouchAPIKey(ctx context.Context, hash string, t time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE api_keys SET last_used = ? WHERE hash = ?`, t.Unix(), hash); err != nil {
		return fmt.Errorf("touch api key: %w", err)
	}
	return nil
}
