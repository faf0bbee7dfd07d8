package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// AddSandboxLog implements store.Store.
func (s *Store) AddSandboxLog(ctx context.Context, l store.SandboxLog, events ...store.Event) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.addLogTx(ctx, tx, l); err != nil {
			return err
		}
		for _, e := range events {
			if err := s.addEventTx(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// SandboxLogs implements store.Store.
func (s *Store) SandboxLogs(ctx context.Context, q store.LogQuery) ([]store.SandboxLog, error) {
	query := `SELECT at, level, message, fields FROM sandbox_logs WHERE sandbox_id = $1 AND team = $2`
	args := []any{q.SandboxID, q.Team}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	order := ` ORDER BY at, seq`
	switch {
	case q.Backward:
		if !q.Cursor.IsZero() {
			query += ` AND at <= ` + arg(q.Cursor.UnixNano())
		}
		order = ` ORDER BY at DESC, seq DESC`
	case !q.Cursor.IsZero():
		query += ` AND at >= ` + arg(q.Cursor.UnixNano())
	}
	if len(q.Levels) > 0 {
		query += ` AND level = ANY(` + arg(q.Levels) + `)`
	}
	if q.Search != "" {
		query += ` AND strpos(message, ` + arg(q.Search) + `) > 0`
	}
	query += order
	if q.Limit > 0 {
		query += ` LIMIT ` + arg(q.Limit)
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the log of sandbox %s: %w", q.SandboxID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.SandboxLog, error) {
		l := store.SandboxLog{SandboxID: q.SandboxID, Team: q.Team}
		var at int64
		err := r.Scan(&at, &l.Level, &l.Message, &l.Fields)
		l.Time = time.Unix(0, at)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the log of sandbox %s: %w", q.SandboxID, err)
	}
	return out, nil
}
