package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/template"
)

// AppendBuildLog stores entries of a build's log, the first at place from.
func (s *Store) AppendBuildLog(ctx context.Context, buildID string, from int, entries []template.LogEntry) error {
	rows := make([][]any, len(entries))
	for i, e := range entries {
		rows[i] = []any{buildID, from + i, e.Time.UnixNano(), e.Level, e.Message, e.Step}
	}
	if _, err := s.pool.CopyFrom(ctx, pgx.Identifier{"build_logs"}, []string{"build_id", "seq", "at", "level", "message", "step"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("store the log of build %s: %w", buildID, err)
	}
	return nil
}

// BuildLog returns a build's log from place offset on.
func (s *Store) BuildLog(ctx context.Context, buildID string, offset int) ([]template.LogEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT at, level, message, step FROM build_logs WHERE build_id = $1 AND seq >= $2 ORDER BY seq`, buildID, offset)
	if err != nil {
		return nil, fmt.Errorf("read the log of build %s: %w", buildID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (template.LogEntry, error) {
		var e template.LogEntry
		var at int64
		err := r.Scan(&at, &e.Level, &e.Message, &e.Step)
		e.Time = time.Unix(0, at)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the log of build %s: %w", buildID, err)
	}
	return out, nil
}

// PruneBuildLogs removes the logs of builds whose last entry is older
// than age.
func (s *Store) PruneBuildLogs(ctx context.Context, age time.Duration) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM build_logs WHERE build_id IN
		(SELECT build_id FROM build_logs GROUP BY build_id HAVING max(at) < $1)`, time.Now().Add(-age).UnixNano())
	if err != nil {
		return fmt.Errorf("prune build logs: %w", err)
	}
	return nil
}
