package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// AddTeam implements store.Store.
func (s *Store) AddTeam(ctx context.Context, t store.Team) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add team: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM teams WHERE id IN (?, ?) OR name IN (?, ?)`, t.ID, t.Name, t.ID, t.Name).Scan(&n); err != nil {
		return fmt.Errorf("add team: %w", err)
	}
	if n > 0 {
		return errs.New(errs.AlreadyExists, "a team named %s exists", t.Name)
	}
	q := t.Quota
	if _, err := tx.ExecContext(ctx, `INSERT INTO teams (id, name, created_at, `+quotaColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.CreatedAt.Unix(), q.MaxSandboxes, q.MaxCPUs, q.MaxMemoryMB, q.MaxDiskMB, q.MaxStorageMB); err != nil {
		return fmt.Errorf("add team: %w", err)
	}
	return tx.Commit()
}

const (
	quotaColumns = `max_sandboxes, max_cpus, max_memory_mb, max_disk_mb, max_storage_mb`
	teamColumns  = `id, name, created_at, ` + quotaColumns
)

func scanTeam(row interface{ Scan(...any) error }) (store.Team, error) {
	var t store.Team
	var created int64
	q := &t.Quota
	err := row.Scan(&t.ID, &t.Name, &created, &q.MaxSandboxes, &q.MaxCPUs, &q.MaxMemoryMB, &q.MaxDiskMB, &q.MaxStorageMB)
	t.CreatedAt = time.Unix(created, 0).UTC()
	return t, err
}

// Team implements store.Store.
func (s *Store) Team(ctx context.Context, ref string) (store.Team, error) {
	t, err := scanTeam(s.db.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = ? OR name = ? ORDER BY id = ? DESC LIMIT 1`, ref, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return t, errs.New(errs.NotFound, "team %s not found", ref)
	}
	if err != nil {
		return t, fmt.Errorf("look up team: %w", err)
	}
	return t, nil
}

// Teams implements store.Store.
func (s *Store) Teams(ctx context.Context) ([]store.Team, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+teamColumns+` FROM teams ORDER BY created_at, name`)
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	defer rows.Close()
	var out []store.Team
	for rows.Next() {
		t, err := scanTeam(rows)
		if err != nil {
			return nil, fmt.Errorf("list teams: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// SetTeamQuota implements store.Store.
func (s *Store) SetTeamQuota(ctx context.Context, id string, q store.TeamQuota) error {
	cols, args := q.Set()
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = ?"
	}
	if len(set) == 0 {
		_, err := s.Team(ctx, id)
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE teams SET `+strings.Join(set, ", ")+` WHERE id = ?`, append(args, id)...)
	if err != nil {
		return fmt.Errorf("set team quota: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, "team %s not found", id)
	}
	return nil
}

// teamTables are the tables of a team's records that go with it (its
// secrets and webhooks, with their deliveries, go by their foreign keys).
var teamTables = []string{"api_keys", "events", "event_metadata", "event_totals", "idempotency", "sandbox_logs", "log_totals"}

// DeleteTeam implements store.Store.
func (s *Store) DeleteTeam(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete team: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE team = ?`, id).Scan(&n); err != nil {
		return fmt.Errorf("delete team: %w", err)
	}
	if n > 0 {
		return errs.New(errs.Conflict, "team %s has %d sandboxes (running or paused): kill them first", id, n)
	}
	for _, table := range teamTables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE team = ?`, id); err != nil {
			return fmt.Errorf("delete team's %s: %w", table, err)
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM teams WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete team: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, "team %s not found", id)
	}
	return tx.Commit()
}
