package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// AddSandboxLog implements store.Store.
func (s *Store) AddSandboxLog(ctx context.Context, l store.SandboxLog, events ...store.Event) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("log of sandbox %s: %w", l.SandboxID, err)
	}
	defer tx.Rollback()
	if err := s.addLogTx(ctx, tx, l); err != nil {
		return err
	}
	for _, e := range events {
		if err := s.addEventTx(ctx, tx, e); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// SandboxLogs implements store.Store.
func (s *Store) SandboxLogs(ctx context.Context, q store.LogQuery) ([]store.SandboxLog, error) {
	query := `SELECT at, level, message, fields FROM sandbox_logs WHERE sandbox_id = ? AND team = ?`
	args := []any{q.SandboxID, q.Team}
	order := ` ORDER BY at, seq`
	switch {
	case q.Backward:
		if !q.Cursor.IsZero() {
			query += ` AND at <= ?`
			args = append(args, q.Cursor.UnixNano())
		}
		order = ` ORDER BY at DESC, seq DESC`
	case !q.Cursor.IsZero():
		query += ` AND at >= ?`
		args = append(args, q.Cursor.UnixNano())
	}
	if len(q.Levels) > 0 {
		query += ` AND level IN (?` + strings.Repeat(", ?", len(q.Levels)-1) + `)`
		for _, l := range q.Levels {
			args = append(args, l)
		}
	}
	if q.Search != "" {
		query += ` AND instr(message, ?) > 0`
		args = append(args, q.Search)
	}
	query += order
	if q.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the log of sandbox %s: %w", q.SandboxID, err)
	}
	defer rows.Close()
	var out []store.SandboxLog
	for rows.Next() {
		l := store.SandboxLog{SandboxID: q.SandboxID, Team: q.Team}
		var at int64
		var fields string
		if err := rows.Scan(&at, &l.Level, &l.Message, &fields); err != nil {
			return nil, fmt.Errorf("read the log of sandbox %s: %w", q.SandboxID, err)
		}
		l.Time = time.Unix(0, at)
		if err := json.Unmarshal([]byte(fields), &l.Fields); err != nil {
			return nil, fmt.Errorf("read the log of sandbox %s: fields: %w", q.SandboxID, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the log of sandbox %s: %w", q.SandboxID, err)
	}
	return out, nil
}
