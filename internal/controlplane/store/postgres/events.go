package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// AddEvent implements store.Store.
func (s *Store) AddEvent(ctx context.Context, e store.Event) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.addEventTx(ctx, tx, e) })
}

// lockTeamEvents holds team's events for tx: one replica's transaction
// at a time adds, drops or counts them, so that no metadata is dropped
// while another adds an event that names it.
func lockTeamEvents(ctx context.Context, tx pgx.Tx, team string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cove-events:' || $1))`, team); err != nil {
		return fmt.Errorf("lock team %s's events: %w", team, err)
	}
	return nil
}

// addEventTx records e and its deliveries in tx, and drops its team's
// oldest events past the team's bounds.
func (s *Store) addEventTx(ctx context.Context, tx pgx.Tx, e store.Event) error {
	bare, metadata, sum, err := store.SplitEvent(e.Body)
	if err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	if err := lockTeamEvents(ctx, tx, e.Team); err != nil {
		return err
	}
	size := int64(len(bare))
	if sum != "" {
		tag, err := tx.Exec(ctx, `INSERT INTO event_metadata (team, sum, metadata) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			e.Team, sum, metadata)
		if err != nil {
			return fmt.Errorf("add event's metadata: %w", err)
		}
		if tag.RowsAffected() == 1 {
			size += int64(len(metadata))
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (id, team, sandbox_id, type, at, body, metadata_sum, size) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		e.ID, e.Team, e.SandboxID, e.Type, e.Time, bare, sum, len(bare)); err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	var events, bytes int64
	if err := tx.QueryRow(ctx, `INSERT INTO event_totals (team, events, bytes) VALUES ($1, 1, $2)
		ON CONFLICT (team) DO UPDATE SET events = event_totals.events + 1, bytes = event_totals.bytes + excluded.bytes
		RETURNING events, bytes`, e.Team, size).Scan(&events, &bytes); err != nil {
		return fmt.Errorf("count team's events: %w", err)
	}
	if events > int64(s.limits.Events) || bytes > s.limits.EventBytes {
		if err := s.trimEvents(ctx, tx, e.Team, e.ID, events, bytes); err != nil {
			return err
		}
	}
	tag, err := tx.Exec(ctx, `INSERT INTO deliveries (id, webhook_id, event_id, next_at, team)
		SELECT gen_random_uuid()::text, id, $1, $2, team FROM webhooks WHERE team = $3 AND enabled AND events ? $4`,
		e.ID, e.Time, e.Team, e.Type)
	if err != nil {
		return fmt.Errorf("add event's deliveries: %w", err)
	}
	if tag.RowsAffected() > 0 {
		if err := s.boundDeliveries(ctx, tx, e.Team); err != nil {
			return err
		}
	}
	if e.Type == store.EventCreated && e.Template != "" {
		if _, err := tx.Exec(ctx, `INSERT INTO template_spawns (template_id, count, last_at) VALUES ($1, 1, $2)
			ON CONFLICT (template_id) DO UPDATE SET count = template_spawns.count + 1, last_at = greatest(template_spawns.last_at, excluded.last_at)`,
			e.Template, e.Time); err != nil {
			return fmt.Errorf("count a spawn of template %s: %w", e.Template, err)
		}
	}
	return nil
}

// boundDeliveries gives up team's deliveries of its oldest events past
// the team's bound (tx holds the team's events).
func (s *Store) boundDeliveries(ctx context.Context, tx pgx.Tx, team string) error {
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE team = $1`, team).Scan(&n); err != nil {
		return fmt.Errorf("count team's deliveries: %w", err)
	}
	if n <= s.limits.Deliveries {
		return nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE id IN (SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.team = $1 ORDER BY e.at, d.id LIMIT $2)`, team, n-s.limits.Deliveries); err != nil {
		return fmt.Errorf("give up team's oldest deliveries: %w", err)
	}
	return nil
}

// TemplateSpawns implements store.Store.
func (s *Store) TemplateSpawns(ctx context.Context) (map[string]store.Spawns, error) {
	rows, err := s.pool.Query(ctx, `SELECT template_id, count, last_at FROM template_spawns`)
	if err != nil {
		return nil, fmt.Errorf("read template spawns: %w", err)
	}
	defer rows.Close()
	out := map[string]store.Spawns{}
	for rows.Next() {
		var id string
		var sp store.Spawns
		if err := rows.Scan(&id, &sp.Count, &sp.Last); err != nil {
			return nil, fmt.Errorf("read template spawns: %w", err)
		}
		sp.Last = sp.Last.UTC()
		out[id] = sp
	}
	return out, rows.Err()
}

// Events implements store.Store.
func (s *Store) Events(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	order := "DESC"
	if q.Ascending {
		order = "ASC"
	}
	types := q.Types
	if types == nil {
		types = []string{}
	}
	rows, err := s.pool.Query(ctx, `SELECT e.id, e.team, e.sandbox_id, e.type, e.at, e.body, m.metadata FROM events e
		LEFT JOIN event_metadata m ON m.team = e.team AND m.sum = e.metadata_sum
		WHERE e.team = $1 AND ($2 = '' OR e.sandbox_id = $2) AND (cardinality($3::text[]) = 0 OR e.type = ANY($3))
		ORDER BY e.at `+order+`, e.id `+order+` LIMIT $4 OFFSET $5`, q.Team, q.SandboxID, types, q.Limit, q.Offset)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Event, error) {
		var e store.Event
		var metadata []byte
		if err := r.Scan(&e.ID, &e.Team, &e.SandboxID, &e.Type, &e.Time, &e.Body, &metadata); err != nil {
			return e, err
		}
		e.Time = e.Time.UTC()
		e.Body, err = store.JoinEvent(e.Body, metadata)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

const webhookColumns = `id, team, name, url, enabled, events, secret, created_at`

func scanWebhook(row pgx.Row) (store.Webhook, error) {
	var w store.Webhook
	err := row.Scan(&w.ID, &w.Team, &w.Name, &w.URL, &w.Enabled, &w.Events, &w.Secret, &w.CreatedAt)
	w.CreatedAt = w.CreatedAt.UTC()
	return w, err
}

func webhookNotFound(id string) error { return errs.New(errs.NotFound, "webhook %s not found", id) }

// AddWebhook implements store.Store.
func (s *Store) AddWebhook(ctx context.Context, w store.Webhook) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		w.ID, w.Team, w.Name, w.URL, w.Enabled, w.Events, w.Secret, w.CreatedAt); err != nil {
		return fmt.Errorf("add webhook: %w", err)
	}
	return nil
}

// Webhook implements store.Store.
func (s *Store) Webhook(ctx context.Context, team, id string) (store.Webhook, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE team = $1 AND id = $2`, team, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, webhookNotFound(id)
	}
	if err != nil {
		return w, fmt.Errorf("look up webhook: %w", err)
	}
	return w, nil
}

// TeamWebhooks implements store.Store.
func (s *Store) TeamWebhooks(ctx context.Context, team string) ([]store.Webhook, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE team = $1 ORDER BY created_at, id`, team)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Webhook, error) { return scanWebhook(r) })
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

// UpdateWebhook implements store.Store.
func (s *Store) UpdateWebhook(ctx context.Context, w store.Webhook) error {
	tag, err := s.pool.Exec(ctx, `UPDATE webhooks SET name = $1, url = $2, enabled = $3, events = $4, secret = $5 WHERE team = $6 AND id = $7`,
		w.Name, w.URL, w.Enabled, w.Events, w.Secret, w.Team, w.ID)
	if err != nil {
		return fmt.Errorf("update webhook: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return webhookNotFound(w.ID)
	}
	return nil
}

// DeleteWebhook implements store.Store.
func (s *Store) DeleteWebhook(ctx context.Context, team, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhooks WHERE team = $1 AND id = $2`, team, id)
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return webhookNotFound(id)
	}
	return nil
}

// ClaimDeliveries implements store.Store: rows another replica holds
// locked are skipped.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.Delivery, error) {
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT id FROM deliveries WHERE next_at <= $1 ORDER BY next_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE deliveries d SET next_at = $3 FROM due, webhooks w, events e
		WHERE d.id = due.id AND w.id = d.webhook_id AND e.id = d.event_id
		RETURNING d.id, d.webhook_id, d.event_id, d.attempt, w.team, w.url, w.secret, e.body,
			(SELECT metadata FROM event_metadata m WHERE m.team = e.team AND m.sum = e.metadata_sum)`, now, limit, now.Add(lease))
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Delivery, error) {
		var d store.Delivery
		var metadata []byte
		if err := r.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.Attempt, &d.Team, &d.URL, &d.Secret, &d.Body, &metadata); err != nil {
			return d, err
		}
		d.Body, err = store.JoinEvent(d.Body, metadata)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// FinishDelivery implements store.Store.
func (s *Store) FinishDelivery(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM deliveries WHERE id = $1`, id); err != nil {
		return fmt.Errorf("finish delivery: %w", err)
	}
	return nil
}

// RetryDelivery implements store.Store.
func (s *Store) RetryDelivery(ctx context.Context, id string, next time.Time, why string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE deliveries SET attempt = attempt + 1, next_at = $2, last_error = $3 WHERE id = $1`, id, next, why); err != nil {
		return fmt.Errorf("retry delivery: %w", err)
	}
	return nil
}

// WebhookDeliveries implements store.Store.
func (s *Store) WebhookDeliveries(ctx context.Context, team, webhookID string) ([]store.Delivery, error) {
	if _, err := s.Webhook(ctx, team, webhookID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT d.id, d.event_id, d.attempt, d.next_at, d.last_error, e.body, m.metadata
		FROM deliveries d JOIN events e ON e.id = d.event_id LEFT JOIN event_metadata m ON m.team = e.team AND m.sum = e.metadata_sum
		WHERE d.webhook_id = $1 ORDER BY d.next_at, d.id`, webhookID)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Delivery, error) {
		d := store.Delivery{WebhookID: webhookID, Team: team}
		var metadata []byte
		if err := r.Scan(&d.ID, &d.EventID, &d.Attempt, &d.NextAt, &d.LastError, &d.Body, &metadata); err != nil {
			return d, err
		}
		d.NextAt = d.NextAt.UTC()
		d.Body, err = store.JoinEvent(d.Body, metadata)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	return out, nil
}
