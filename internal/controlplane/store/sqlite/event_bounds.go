package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// trimEvents drops team's oldest events, but keep, until the team has
// no more than its bounds: it had events of bytes (event_totals'). Each
// round drops events up to the first that names metadata, then the
// metadata no event names any more, so that no more goes than must.
func (s *Store) trimEvents(ctx context.Context, tx *sql.Tx, team, keep string, events, bytes int64) error {
	for events > int64(s.limits.Events) || bytes > s.limits.EventBytes {
		rows, err := tx.QueryContext(ctx, `SELECT id, size, metadata_sum FROM events WHERE team = ? AND id <> ? ORDER BY at, id LIMIT 64`, team, keep)
		if err != nil {
			return fmt.Errorf("drop team's oldest events: %w", err)
		}
		var drop []any
		var named string // the metadata the last event dropped names
		var n, freed int64
		for rows.Next() && (events-n > int64(s.limits.Events) || bytes-freed > s.limits.EventBytes) {
			var id string
			var size int64
			if err := rows.Scan(&id, &size, &named); err != nil {
				rows.Close()
				return fmt.Errorf("drop team's oldest events: %w", err)
			}
			drop, n, freed = append(drop, id), n+1, freed+size
			if named != "" { // what its metadata frees is known once it is dropped
				break
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("drop team's oldest events: %w", err)
		}
		if len(drop) == 0 { // keep alone is left
			return nil
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN (?`+strings.Repeat(", ?", len(drop)-1)+`)`, drop...); err != nil {
			return fmt.Errorf("drop team's oldest events: %w", err)
		}
		if named != "" {
			var size int64
			err := tx.QueryRowContext(ctx, `DELETE FROM event_metadata WHERE team = ? AND sum = ?
				AND NOT EXISTS (SELECT 1 FROM events WHERE team = ? AND metadata_sum = ?) RETURNING length(metadata)`,
				team, named, team, named).Scan(&size)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("drop metadata no event names: %w", err)
			}
			freed += size
		}
		if _, err := tx.ExecContext(ctx, `UPDATE event_totals SET events = events - ?, bytes = bytes - ? WHERE team = ?`, n, freed, team); err != nil {
			return fmt.Errorf("count team's events: %w", err)
		}
		events, bytes = events-n, bytes-freed
	}
	return nil
}

// PruneEvents implements store.Store: the events older than before
// go, with their deliveries, and the metadata no event names any more.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("prune events: %w", err)
	}
	defer tx.Rollback()
	at := before.UnixNano()
	for _, q := range []struct {
		what, sql string
		args      []any
	}{
		{"count what goes", `UPDATE event_totals SET
			events = events - (SELECT count(*) FROM events e WHERE e.team = event_totals.team AND e.at < ?),
			bytes = bytes - (SELECT coalesce(sum(size), 0) FROM events e WHERE e.team = event_totals.team AND e.at < ?)`, []any{at, at}},
		{"prune events", `DELETE FROM events WHERE at < ?`, []any{at}},
		{"count metadata that goes", `UPDATE event_totals SET bytes = bytes - (SELECT coalesce(sum(length(metadata)), 0) FROM event_metadata m
			WHERE m.team = event_totals.team AND NOT EXISTS (SELECT 1 FROM events e WHERE e.team = m.team AND e.metadata_sum = m.sum))`, nil},
		{"prune metadata", `DELETE FROM event_metadata
			WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.team = event_metadata.team AND e.metadata_sum = event_metadata.sum)`, nil},
		{"forget teams without events", `DELETE FROM event_totals WHERE events <= 0`, nil},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("prune events: %s: %w", q.what, err)
		}
	}
	return tx.Commit()
}
