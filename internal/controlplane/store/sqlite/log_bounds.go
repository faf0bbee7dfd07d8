package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// addLogTx appends l to its sandbox's log in tx, and drops its team's
// oldest lines past the team's bounds.
func (s *Store) addLogTx(ctx context.Context, tx *sql.Tx, l store.SandboxLog) error {
	fields := []byte("{}")
	if l.Fields != nil {
		var err error
		if fields, err = json.Marshal(l.Fields); err != nil {
			return fmt.Errorf("encode log fields: %w", err)
		}
	}
	size := len(l.Message) + len(fields)
	if _, err := tx.ExecContext(ctx, `INSERT INTO sandbox_logs (sandbox_id, team, at, level, message, fields, size) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		l.SandboxID, l.Team, l.Time.UnixNano(), l.Level, l.Message, string(fields), size); err != nil {
		return fmt.Errorf("log of sandbox %s: %w", l.SandboxID, err)
	}
	var lines, bytes int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO log_totals (team, lines, bytes) VALUES (?, 1, ?)
		ON CONFLICT (team) DO UPDATE SET lines = lines + 1, bytes = bytes + excluded.bytes RETURNING lines, bytes`,
		l.Team, size).Scan(&lines, &bytes); err != nil {
		return fmt.Errorf("count team's log lines: %w", err)
	}
	for lines > int64(s.limits.LogLines) || bytes > s.limits.LogBytes {
		n, freed, err := s.dropOldestLines(ctx, tx, l.Team, lines, bytes)
		if err != nil || n == 0 {
			return err
		}
		lines, bytes = lines-n, bytes-freed
	}
	return nil
}

// dropOldestLines drops up to 64 of team's oldest lines, as many as
// bring its lines and bytes within its bounds, and counts them.
func (s *Store) dropOldestLines(ctx context.Context, tx *sql.Tx, team string, lines, bytes int64) (n, freed int64, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, size FROM sandbox_logs WHERE team = ? ORDER BY seq LIMIT 64`, team)
	if err != nil {
		return 0, 0, fmt.Errorf("drop team's oldest log lines: %w", err)
	}
	var drop []any
	for rows.Next() && (lines-n > int64(s.limits.LogLines) || bytes-freed > s.limits.LogBytes) {
		var seq, size int64
		if err := rows.Scan(&seq, &size); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("drop team's oldest log lines: %w", err)
		}
		drop, n, freed = append(drop, seq), n+1, freed+size
	}
	rows.Close()
	if err := rows.Err(); err != nil || n == 0 {
		return 0, 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_logs WHERE seq IN (?`+strings.Repeat(", ?", len(drop)-1)+`)`, drop...); err != nil {
		return 0, 0, fmt.Errorf("drop team's oldest log lines: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE log_totals SET lines = lines - ?, bytes = bytes - ? WHERE team = ?`, n, freed, team); err != nil {
		return 0, 0, fmt.Errorf("count team's log lines: %w", err)
	}
	return n, freed, nil
}

// PruneSandboxLogs implements store.Store.
func (s *Store) PruneSandboxLogs(ctx context.Context, before time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("prune sandbox logs: %w", err)
	}
	defer tx.Rollback()
	at := before.UnixNano()
	for _, q := range []struct {
		what, sql string
		args      []any
	}{
		{"count what goes", `UPDATE log_totals SET
			lines = lines - (SELECT count(*) FROM sandbox_logs l WHERE l.team = log_totals.team AND l.at < ?),
			bytes = bytes - (SELECT coalesce(sum(size), 0) FROM sandbox_logs l WHERE l.team = log_totals.team AND l.at < ?)`, []any{at, at}},
		{"prune", `DELETE FROM sandbox_logs WHERE at < ?`, []any{at}},
		{"forget teams without lines", `DELETE FROM log_totals WHERE lines <= 0`, nil},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("prune sandbox logs: %s: %w", q.what, err)
		}
	}
	return tx.Commit()
}
