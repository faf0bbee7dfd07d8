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

// BuildLog returns the page of a build's log p selects.
func (s *Store) BuildLog(ctx context.Context, buildID string, p template.LogPage) ([]template.LogEntry, error) {
	var limit any // NULL: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	q, args := `SELECT at, level, message, step FROM build_logs WHERE build_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`, []any{buildID, p.Offset, limit}
	if p.Levels != nil {
		q = `SELECT at, level, message, step FROM build_logs WHERE build_id = $1 AND level = ANY($2) ORDER BY seq LIMIT $3 OFFSET $4`
		args = []any{buildID, p.Levels, limit, p.Offset}
	}
	rows, err := s.pool.Query(ctx, q, args...)
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

// BuildLogBytes is what the logs of builds hold, each entry counted as its
// message and template.LogEntryOverhead.
func (s *Store) BuildLogBytes(ctx context.Context, buildIDs []string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(SUM(octet_length(message) + $2), 0) FROM build_logs WHERE build_id = ANY($1)`,
		buildIDs, template.LogEntryOverhead).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the builds' logs: %w", err)
	}
	return n, nil
}

// DeleteBuildLogs removes the logs of builds.
func (s *Store) DeleteBuildLogs(ctx context.Context, buildIDs []string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM build_logs WHERE build_id = ANY($1)`, buildIDs); err != nil {
		return fmt.Errorf("delete the builds' logs: %w", err)
	}
	return nil
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
