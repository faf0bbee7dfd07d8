package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// addLogTx appends l to its sandbox's log in tx, and drops its team's
// oldest lines past the team's bounds. The team's row of log_totals,
// updated here, holds its lines for tx.
func (s *Store) addLogTx(ctx context.Context, tx pgx.Tx, l store.SandboxLog) error {
	fields := l.Fields
	if fields == nil {
		fields = map[string]string{}
	}
	text, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("encode log fields: %w", err)
	}
	size := len(l.Message) + len(text)
	if _, err := tx.Exec(ctx, `INSERT INTO sandbox_logs (sandbox_id, team, at, level, message, fields, size) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		l.SandboxID, l.Team, l.Time.UnixNano(), l.Level, l.Message, fields, size); err != nil {
		return fmt.Errorf("log of sandbox %s: %w", l.SandboxID, err)
	}
	var lines, bytes int64
	if err := tx.QueryRow(ctx, `INSERT INTO log_totals (team, lines, bytes) VALUES ($1, 1, $2)
		ON CONFLICT (team) DO UPDATE SET lines = log_totals.lines + 1, bytes = log_totals.bytes + excluded.bytes RETURNING lines, bytes`,
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
func (s *Store) dropOldestLines(ctx context.Context, tx pgx.Tx, team string, lines, bytes int64) (n, freed int64, err error) {
	rows, err := tx.Query(ctx, `SELECT seq, size FROM sandbox_logs WHERE team = $1 ORDER BY seq LIMIT 64`, team)
	if err != nil {
		return 0, 0, fmt.Errorf("drop team's oldest log lines: %w", err)
	}
	var drop []int64
	var want int64 // what the drop frees, by the sizes read
	for rows.Next() && (lines-int64(len(drop)) > int64(s.limits.LogLines) || bytes-want > s.limits.LogBytes) {
		var seq, size int64
		if err := rows.Scan(&seq, &size); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("drop team's oldest log lines: %w", err)
		}
		drop, want = append(drop, seq), want+size
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(drop) == 0 {
		return 0, 0, err
	}
	// What is counted is what this statement removed.
	if err := tx.QueryRow(ctx, `WITH gone AS (DELETE FROM sandbox_logs WHERE seq = ANY($1) RETURNING size)
		SELECT count(*), coalesce(sum(size), 0) FROM gone`, drop).Scan(&n, &freed); err != nil {
		return 0, 0, fmt.Errorf("drop team's oldest log lines: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE log_totals SET lines = lines - $1, bytes = bytes - $2 WHERE team = $3`, n, freed, team); err != nil {
		return 0, 0, fmt.Errorf("count team's log lines: %w", err)
	}
	return n, freed, nil
}

// PruneSandboxLogs implements store.Store: each team's old lines go, and
// its totals count what the delete removed.
func (s *Store) PruneSandboxLogs(ctx context.Context, before time.Time) error {
	rows, err := s.pool.Query(ctx, `SELECT team FROM log_totals`)
	if err != nil {
		return fmt.Errorf("prune sandbox logs: %w", err)
	}
	teams, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("prune sandbox logs: %w", err)
	}
	for _, team := range teams {
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `WITH gone AS (DELETE FROM sandbox_logs WHERE team = $1 AND at < $2 RETURNING size)
				UPDATE log_totals SET lines = lines - (SELECT count(*) FROM gone), bytes = bytes - (SELECT coalesce(sum(size), 0) FROM gone)
				WHERE team = $1`, team, before.UnixNano()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM log_totals WHERE team = $1 AND lines <= 0`, team)
			return err
		}); err != nil {
			return fmt.Errorf("prune team %s's sandbox logs: %w", team, err)
		}
	}
	return nil
}
