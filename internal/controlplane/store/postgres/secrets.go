package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

const secretColumns = `id, team, name, version, metadata, sealed, created_at, updated_at`

func scanSecret(row pgx.Row) (store.TeamSecret, error) {
	var s store.TeamSecret
	if err := row.Scan(&s.ID, &s.Team, &s.Name, &s.Version, &s.Metadata, &s.Sealed, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return s, err
	}
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return s, nil
}

func secretNotFound(ref string) error { return errs.New(errs.NotFound, "secret %s not found", ref) }

// AddTeamSecret implements store.Store.
func (s *Store) AddTeamSecret(ctx context.Context, sec store.TeamSecret) error {
	meta := sec.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO team_secrets (`+secretColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		sec.ID, sec.Team, sec.Name, sec.Version, meta, sec.Sealed, sec.CreatedAt, sec.UpdatedAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return errs.New(errs.AlreadyExists, "a secret named %s exists", sec.Name)
	}
	if err != nil {
		return fmt.Errorf("add secret: %w", err)
	}
	return nil
}

// TeamSecret implements store.Store.
func (s *Store) TeamSecret(ctx context.Context, team, ref string) (store.TeamSecret, error) {
	sec, err := scanSecret(s.pool.QueryRow(ctx, `SELECT `+secretColumns+` FROM team_secrets
		WHERE team = $1 AND (id = $2 OR name = $2) ORDER BY id = $2 DESC LIMIT 1`, team, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return sec, secretNotFound(ref)
	}
	if err != nil {
		return sec, fmt.Errorf("look up secret: %w", err)
	}
	return sec, nil
}

// TeamSecrets implements store.Store.
func (s *Store) TeamSecrets(ctx context.Context, team, after string, limit int) ([]store.TeamSecret, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+secretColumns+` FROM team_secrets WHERE team = $1 AND name COLLATE "C" > $2 ORDER BY name COLLATE "C" LIMIT $3`, team, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.TeamSecret, error) { return scanSecret(r) })
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// UpdateTeamSecret implements store.Store.
func (s *Store) UpdateTeamSecret(ctx context.Context, team, id string, sealed []byte, metadata map[string]string, at time.Time) (store.TeamSecret, error) {
	var meta any // NULL: keep
	if metadata != nil {
		meta = metadata
	}
	sec, err := scanSecret(s.pool.QueryRow(ctx, `UPDATE team_secrets SET sealed = $1, version = version + 1,
		metadata = coalesce($2, metadata), updated_at = $3 WHERE team = $4 AND id = $5 RETURNING `+secretColumns,
		sealed, meta, at, team, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return sec, secretNotFound(id)
	}
	if err != nil {
		return sec, fmt.Errorf("update secret: %w", err)
	}
	return sec, nil
}

// DeleteTeamSecret implements store.Store.
func (s *Store) DeleteTeamSecret(ctx context.Context, team, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM team_secrets WHERE team = $1 AND id = $2`, team, id)
	if err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return secretNotFound(id)
	}
	return nil
}
