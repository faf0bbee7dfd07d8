package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/template"
)

// AppendBuildLog implements store.Store.
func (s *Store) AppendBuildLog(ctx context.Context, buildID string, from int, entries []template.LogEntry) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store the log of build %s: %w", buildID, err)
	}
	defer tx.Rollback()
	for i, e := range entries {
		if _, err := tx.ExecContext(ctx, `INSERT INTO build_logs (build_id, seq, at, level, message, step) VALUES (?, ?, ?, ?, ?, ?)`,
			buildID, from+i, e.Time.UnixNano(), e.Level, e.Message, e.Step); err != nil {
			return fmt.Errorf("store the log of build %s: %w", buildID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store the log of build %s: %w", buildID, err)
	}
	return nil
}

// BuildLog implements store.Store.
func (s *Store) BuildLog(ctx context.Context, buildID string, offset int) ([]template.LogEntry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, level, message, step FROM build_logs WHERE build_id = ? AND seq >= ? ORDER BY seq`, buildID, offset)
	if err != nil {
		return nil, fmt.Errorf("read the log of build %s: %w", buildID, err)
	}
	defer rows.Close()
	var out []template.LogEntry
	for rows.Next() {
		var e template.LogEntry
		var at int64
		if err := rows.Scan(&at, &e.Level, &e.Message, &e.Step); err != nil {
			return nil, fmt.Errorf("read the log of build %s: %w", buildID, err)
		}
		e.Time = time.Unix(0, at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the log of build %s: %w", buildID, err)
	}
	return out, nil
}

// PruneBuildLogs implements store.Store.
func (s *Store) PruneBuildLogs(ctx context.Context, age time.Duration) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM build_logs WHERE build_id IN
		(SELECT build_id FROM build_logs GROUP BY build_id HAVING max(at) < ?)`, time.Now().Add(-age).UnixNano())
	if err != nil {
		return fmt.Errorf("prune build logs: %w", err)
	}
	return nil
}
