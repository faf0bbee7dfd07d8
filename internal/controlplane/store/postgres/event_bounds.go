package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// trimEvents drops team's oldest events, but keep, until the team has
// no more than its bounds: it had events of bytes (event_totals'). Each
// round drops events up to the first that names metadata, then the
// metadata no event names any more, so that no more goes than must. tx
// holds the team's events (lockTeamEvents).
func (s *Store) trimEvents(ctx context.Context, tx pgx.Tx, team, keep string, events, bytes int64) error {
	for events > int64(s.limits.Events) || bytes > s.limits.EventBytes {
		rows, err := tx.Query(ctx, `SELECT id, size, metadata_sum FROM events WHERE team = $1 AND id <> $2 ORDER BY at, id LIMIT 64`, team, keep)
		if err != nil {
			return fmt.Errorf("drop team's oldest events: %w", err)
		}
		var drop []string
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
		if _, err := tx.Exec(ctx, `DELETE FROM events WHERE id = ANY($1)`, drop); err != nil {
			return fmt.Errorf("drop team's oldest events: %w", err)
		}
		if named != "" {
			var size int64
			err := tx.QueryRow(ctx, `DELETE FROM event_metadata WHERE team = $1 AND sum = $2
				AND NOT EXISTS (SELECT 1 FROM events WHERE team = $1 AND metadata_sum = $2) RETURNING octet_length(metadata)`,
				team, named).Scan(&size)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("drop metadata no event names: %w", err)
			}
			freed += size
		}
		if _, err := tx.Exec(ctx, `UPDATE event_totals SET events = events - $1, bytes = bytes - $2 WHERE team = $3`, n, freed, team); err != nil {
			return fmt.Errorf("count team's events: %w", err)
		}
		events, bytes = events-n, bytes-freed
	}
	return nil
}

// PruneEvents implements store.Store: the events older than before
// go, with their deliveries, and the metadata no event names any more;
// team by team, each holding its events meanwhile.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) error {
	rows, err := s.pool.Query(ctx, `SELECT team FROM event_totals`)
	if err != nil {
		return fmt.Errorf("prune events: %w", err)
	}
	teams, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("prune events: %w", err)
	}
	for _, team := range teams {
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return pruneTeamEvents(ctx, tx, team, before) }); err != nil {
			return err
		}
	}
	return nil
}

// pruneTeamEvents drops team's events older than before in tx.
func pruneTeamEvents(ctx context.Context, tx pgx.Tx, team string, before time.Time) error {
	if err := lockTeamEvents(ctx, tx, team); err != nil {
		return err
	}
	for _, q := range []struct {
		what, sql string
		args      []any
	}{
		{"count what goes", `UPDATE event_totals SET events = events - d.n, bytes = bytes - d.b
			FROM (SELECT count(*) AS n, coalesce(sum(size), 0) AS b FROM events WHERE team = $1 AND at < $2) d
			WHERE team = $1`, []any{team, before}},
		{"prune events", `DELETE FROM events WHERE team = $1 AND at < $2`, []any{team, before}},
		{"count metadata that goes", `UPDATE event_totals SET bytes = bytes - (SELECT coalesce(sum(octet_length(metadata)), 0)
			FROM event_metadata m WHERE m.team = $1 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.team = m.team AND e.metadata_sum = m.sum))
			WHERE team = $1`, []any{team}},
		{"prune metadata", `DELETE FROM event_metadata m WHERE m.team = $1
			AND NOT EXISTS (SELECT 1 FROM events e WHERE e.team = m.team AND e.metadata_sum = m.sum)`, []any{team}},
		{"forget a team without events", `DELETE FROM event_totals WHERE team = $1 AND events <= 0`, []any{team}},
	} {
		if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("prune team %s's events: %s: %w", team, q.what, err)
		}
	}
	return nil
}
