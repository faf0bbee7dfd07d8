package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
func (s *Store) BuildLog(ctx context.Context, buildID string, p template.LogPage) ([]template.LogEntry, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite's "no limit"
	}
	q, args := `SELECT at, level, message, step FROM build_logs WHERE build_id = ? AND seq >= ? ORDER BY seq LIMIT ?`, []any{buildID, p.Offset, limit}
	if p.Levels != nil {
		q = `SELECT at, level, message, step FROM build_logs WHERE build_id = ? AND level IN (` + marks(len(p.Levels)) + `) ORDER BY seq LIMIT ? OFFSET ?`
		args = []any{buildID}
		for _, l := range p.Levels {
			args = append(args, l)
		}
		args = append(args, limit, p.Offset)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
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

// idsPerQuery bounds the build ids one statement names (SQLite's limit of
// variables is far above it).
const idsPerQuery = 500

// BuildLogBytes implements store.Store.
func (s *Store) BuildLogBytes(ctx context.Context, buildIDs []string) (int64, error) {
	var total int64
	for ids := range slices.Chunk(buildIDs, idsPerQuery) {
		var n int64
		err := s.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(length(CAST(message AS BLOB)) + ?), 0) FROM build_logs WHERE build_id IN (`+marks(len(ids))+`)`,
			append([]any{template.LogEntryOverhead}, anys(ids)...)...).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("count the builds' logs: %w", err)
		}
		total += n
	}
	return total, nil
}

// DeleteBuildLogs implements store.Store.
func (s *Store) DeleteBuildLogs(ctx context.Context, buildIDs []string) error {
	for ids := range slices.Chunk(buildIDs, idsPerQuery) {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM build_logs WHERE build_id IN (`+marks(len(ids))+`)`, anys(ids)...); err != nil {
			return fmt.Errorf("delete the builds' logs: %w", err)
		}
	}
	return nil
}

// marks is n placeholders, comma-separated.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
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
