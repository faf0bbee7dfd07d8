package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

const secretColumns = `id, team, name, version, metadata, sealed, created_at, updated_at`

func scanSecret(row interface{ Scan(...any) error }) (store.TeamSecret, error) {
	var s store.TeamSecret
	var meta string
	var created, updated int64
	if err := row.Scan(&s.ID, &s.Team, &s.Name, &s.Version, &meta, &s.Sealed, &created, &updated); err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(meta), &s.Metadata); err != nil {
		return s, fmt.Errorf("secret %s's metadata: %w", s.ID, err)
	}
	s.CreatedAt, s.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return s, nil
}

func secretNotFound(ref string) error { return errs.New(errs.NotFound, "secret %s not found", ref) }

// AddTeamSecret implements store.Store.
func (s *Store) AddTeamSecret(ctx context.Context, sec store.TeamSecret) error {
	meta, err := json.Marshal(sec.Metadata)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO team_secrets (`+secretColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		sec.ID, sec.Team, sec.Name, sec.Version, string(meta), sec.Sealed, sec.CreatedAt.UnixMilli(), sec.UpdatedAt.UnixMilli())
	if duplicate(err) {
		return errs.New(errs.AlreadyExists, "a secret named %s exists", sec.Name)
	}
	if err != nil {
		return fmt.Errorf("add secret: %w", err)
	}
	return nil
}

// TeamSecret implements store.Store.
func (s *Store) TeamSecret(ctx context.Context, team, ref string) (store.TeamSecret, error) {
	sec, err := scanSecret(s.db.QueryRowContext(ctx, `SELECT `+secretColumns+` FROM team_secrets
		WHERE team = ? AND (id = ? OR name = ?) ORDER BY id = ? DESC LIMIT 1`, team, ref, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return sec, secretNotFound(ref)
	}
	if err != nil {
		return sec, fmt.Errorf("look up secret: %w", err)
	}
	return sec, nil
}

// TeamSecrets implements store.Store.
func (s *Store) TeamSecrets(ctx context.Context, team, after string, limit int) ([]store.TeamSecret, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+secretColumns+` FROM team_secrets WHERE team = ? AND name > ? ORDER BY name LIMIT ?`, team, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []store.TeamSecret
	for rows.Next() {
		sec, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		out = append(out, sec)
	}
	return out, rows.Err()
}

// UpdateTeamSecret implements store.Store.
func (s *Store) UpdateTeamSecret(ctx context.Context, team, id string, sealed []byte, metadata map[string]string, at time.Time) (store.TeamSecret, error) {
	var meta *string
	if metadata != nil {
		b, err := json.Marshal(metadata)
		if err != nil {
			return store.TeamSecret{}, err
		}
		m := string(b)
		meta = &m
	}
	sec, err := scanSecret(s.db.QueryRowContext(ctx, `UPDATE team_secrets SET sealed = ?, version = version + 1,
		metadata = coalesce(?, metadata), updated_at = ? WHERE team = ? AND id = ? RETURNING `+secretColumns,
		sealed, meta, at.UnixMilli(), team, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sec, secretNotFound(id)
	}
	if err != nil {
		return sec, fmt.Errorf("update secret: %w", err)
	}
	return sec, nil
}

// DeleteTeamSecret implements store.Store.
func (s *Store) DeleteTeamSecret(ctx context.Context, team, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM team_secrets WHERE team = ? AND id = ?`, team, id)
	if err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return secretNotFound(id)
	}
	return nil
}
