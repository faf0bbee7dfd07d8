package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// AddTeam implements store.Store.
func (s *Store) AddTeam(ctx context.Context, t store.Team) error {
	q := t.Quota
	tag, err := s.pool.Exec(ctx, `INSERT INTO teams (id, name, created_at, `+quotaColumns+`)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE NOT EXISTS (SELECT 1 FROM teams WHERE id IN ($1, $2) OR name IN ($1, $2))
		ON CONFLICT DO NOTHING`, t.ID, t.Name, t.CreatedAt, q.MaxSandboxes, q.MaxCPUs, q.MaxMemoryMB, q.MaxDiskMB, q.MaxStorageMB)
	if err != nil {
		return fmt.Errorf("add team: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errs.New(errs.AlreadyExists, "a team named %s exists", t.Name)
	}
	return nil
}

const (
	quotaColumns = `max_sandboxes, max_cpus, max_memory_mb, max_disk_mb, max_storage_mb`
	teamColumns  = `id, name, created_at, ` + quotaColumns
)

func scanTeam(row pgx.Row) (store.Team, error) {
	var t store.Team
	q := &t.Quota
	err := row.Scan(&t.ID, &t.Name, &t.CreatedAt, &q.MaxSandboxes, &q.MaxCPUs, &q.MaxMemoryMB, &q.MaxDiskMB, &q.MaxStorageMB)
	t.CreatedAt = t.CreatedAt.UTC()
	return t, err
}

// Team implements store.Store.
func (s *Store) Team(ctx context.Context, ref string) (store.Team, error) {
	t, err := scanTeam(s.pool.QueryRow(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1`, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.New(errs.NotFound, "team %s not found", ref)
	}
	if err != nil {
		return t, fmt.Errorf("look up team: %w", err)
	}
	return t, nil
}

// Teams implements store.Store.
func (s *Store) Teams(ctx context.Context) ([]store.Team, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+teamColumns+` FROM teams ORDER BY created_at, name`)
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Team, error) { return scanTeam(r) })
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return out, nil
}

// SetTeamQuota implements store.Store.
func (s *Store) SetTeamQuota(ctx context.Context, id string, q store.TeamQuota) error {
	cols, values := q.Set()
	set, args := make([]string, len(cols)), append([]any{id}, values...)
	for i, c := range cols {
		set[i] = fmt.Sprintf("%s = $%d", c, i+2)
	}
	if len(set) == 0 {
		_, err := s.Team(ctx, id)
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE teams SET `+strings.Join(set, ", ")+` WHERE id = $1`, args...)
	if err != nil {
		return fmt.Errorf("set team quota: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errs.New(errs.NotFound, "team %s not found", id)
	}
	return nil
}

// teamTables are the tables of a team's records that go with it (its
// secrets and webhooks, with their deliveries, go by their foreign keys).
var teamTables = []string{"api_keys", "events", "event_metadata", "event_totals", "idempotency", "sandbox_logs", "log_totals"}

// DeleteTeam implements store.Store.
func (s *Store) DeleteTeam(ctx context.Context, id string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var found string
		err := tx.QueryRow(ctx, `SELECT id FROM teams WHERE id = $1 FOR UPDATE`, id).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.New(errs.NotFound, "team %s not found", id)
		}
		if err != nil {
			return fmt.Errorf("delete team: %w", err)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sandboxes WHERE team = $1`, id).Scan(&n); err != nil {
			return fmt.Errorf("delete team: %w", err)
		}
		if n > 0 {
			return errs.New(errs.Conflict, "team %s has %d sandboxes (running or paused): kill them first", id, n)
		}
		if err := lockTeamEvents(ctx, tx, id); err != nil {
			return err
		}
		for _, table := range teamTables {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE team = $1`, id); err != nil {
				return fmt.Errorf("delete team's %s: %w", table, err)
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM teams WHERE id = $1`, id)
		return err
	})
}
