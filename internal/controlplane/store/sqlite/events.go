package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/ids"
)

// AddEvent implements store.Store.
func (s *Store) AddEvent(ctx context.Context, e store.Event) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	defer tx.Rollback()
	if err := s.addEventTx(ctx, tx, e); err != nil {
		return err
	}
	return tx.Commit()
}

// addEventTx records e and its deliveries in tx, and drops its team's
// oldest events past the team's bounds.
func (s *Store) addEventTx(ctx context.Context, tx *sql.Tx, e store.Event) error {
	bare, metadata, sum, err := store.SplitEvent(e.Body)
	if err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	size := int64(len(bare))
	if sum != "" {
		res, err := tx.ExecContext(ctx, `INSERT INTO event_metadata (team, sum, metadata) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			e.Team, sum, metadata)
		if err != nil {
			return fmt.Errorf("add event's metadata: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			size += int64(len(metadata))
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, team, sandbox_id, type, at, body, metadata_sum, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.Team, e.SandboxID, e.Type, e.Time.UnixNano(), bare, sum, len(bare)); err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	var events, bytes int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO event_totals (team, events, bytes) VALUES (?, 1, ?)
		ON CONFLICT (team) DO UPDATE SET events = events + 1, bytes = bytes + excluded.bytes RETURNING events, bytes`,
		e.Team, size).Scan(&events, &bytes); err != nil {
		return fmt.Errorf("count team's events: %w", err)
	}
	if events > int64(s.limits.Events) || bytes > s.limits.EventBytes {
		if err := s.trimEvents(ctx, tx, e.Team, e.ID, events, bytes); err != nil {
			return err
		}
	}
	if e.Type == store.EventCreated && e.Template != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO template_spawns (template_id, count, last_at) VALUES (?, 1, ?)
			ON CONFLICT (template_id) DO UPDATE SET count = count + 1, last_at = max(last_at, excluded.last_at)`,
			e.Template, e.Time.UnixNano()); err != nil {
			return fmt.Errorf("count a spawn of template %s: %w", e.Template, err)
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, events FROM webhooks WHERE team = ? AND enabled = 1`, e.Team)
	if err != nil {
		return fmt.Errorf("add event's deliveries: %w", err)
	}
	var hooks []string
	for rows.Next() {
		var id, types string
		if err := rows.Scan(&id, &types); err != nil {
			rows.Close()
			return err
		}
		var want []string
		_ = json.Unmarshal([]byte(types), &want)
		if slices.Contains(want, e.Type) {
			hooks = append(hooks, id)
		}
	}
	rows.Close()
	for _, h := range hooks {
		if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (id, webhook_id, event_id, next_at, team) VALUES (?, ?, ?, ?, ?)`,
			ids.UUID(), h, e.ID, e.Time.UnixNano(), e.Team); err != nil {
			return fmt.Errorf("add event's deliveries: %w", err)
		}
	}
	if len(hooks) > 0 {
		return s.boundDeliveries(ctx, tx, e.Team)
	}
	return nil
}

// boundDeliveries gives up team's deliveries of its oldest events past
// the team's bound.
func (s *Store) boundDeliveries(ctx context.Context, tx *sql.Tx, team string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM deliveries WHERE team = ?`, team).Scan(&n); err != nil {
		return fmt.Errorf("count team's deliveries: %w", err)
	}
	if n <= s.limits.Deliveries {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM deliveries WHERE id IN (SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id
		WHERE d.team = ? ORDER BY e.at, d.id LIMIT ?)`, team, n-s.limits.Deliveries); err != nil {
		return fmt.Errorf("give up team's oldest deliveries: %w", err)
	}
	return nil
}

// Events implements store.Store.
func (s *Store) Events(ctx context.Context, q store.EventQuery) ([]store.Event, error) {
	where, args := []string{"e.team = ?"}, []any{q.Team}
	if q.SandboxID != "" {
		where, args = append(where, "e.sandbox_id = ?"), append(args, q.SandboxID)
	}
	if len(q.Types) > 0 {
		where = append(where, "e.type IN (?"+strings.Repeat(", ?", len(q.Types)-1)+")")
		for _, t := range q.Types {
			args = append(args, t)
		}
	}
	order := "DESC"
	if q.Ascending {
		order = "ASC"
	}
	rows, err := s.db.QueryContext(ctx, `SELECT e.id, e.team, e.sandbox_id, e.type, e.at, e.body, m.metadata FROM events e
		LEFT JOIN event_metadata m ON m.team = e.team AND m.sum = e.metadata_sum WHERE `+strings.Join(where, " AND ")+
		` ORDER BY e.at `+order+`, e.id `+order+` LIMIT ? OFFSET ?`, append(args, q.Limit, q.Offset)...)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var at int64
		var metadata []byte
		if err := rows.Scan(&e.ID, &e.Team, &e.SandboxID, &e.Type, &at, &e.Body, &metadata); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		if e.Body, err = store.JoinEvent(e.Body, metadata); err != nil {
			return nil, fmt.Errorf("list events: event %s: %w", e.ID, err)
		}
		e.Time = time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

const webhookColumns = `id, team, name, url, enabled, events, secret, created_at`

func scanWebhook(row interface{ Scan(...any) error }) (store.Webhook, error) {
	var w store.Webhook
	var types string
	var created int64
	if err := row.Scan(&w.ID, &w.Team, &w.Name, &w.URL, &w.Enabled, &types, &w.Secret, &created); err != nil {
		return w, err
	}
	if err := json.Unmarshal([]byte(types), &w.Events); err != nil {
		return w, fmt.Errorf("webhook %s's events: %w", w.ID, err)
	}
	w.CreatedAt = time.Unix(0, created).UTC()
	return w, nil
}

func webhookNotFound(id string) error { return errs.New(errs.NotFound, "webhook %s not found", id) }

// AddWebhook implements store.Store.
func (s *Store) AddWebhook(ctx context.Context, w store.Webhook) error {
	types, _ := json.Marshal(w.Events)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.Team, w.Name, w.URL, w.Enabled, string(types), w.Secret, w.CreatedAt.UnixNano()); err != nil {
		return fmt.Errorf("add webhook: %w", err)
	}
	return nil
}

// Webhook implements store.Store.
func (s *Store) Webhook(ctx context.Context, team, id string) (store.Webhook, error) {
	w, err := scanWebhook(s.db.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE team = ? AND id = ?`, team, id))
	if errors.Is(err, sql.ErrNoRows) {
		return w, webhookNotFound(id)
	}
	if err != nil {
		return w, fmt.Errorf("look up webhook: %w", err)
	}
	return w, nil
}

// TeamWebhooks implements store.Store.
func (s *Store) TeamWebhooks(ctx context.Context, team string) ([]store.Webhook, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE team = ? ORDER BY created_at, id`, team)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	defer rows.Close()
	var out []store.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// UpdateWebhook implements store.Store.
func (s *Store) UpdateWebhook(ctx context.Context, w store.Webhook) error {
	types, _ := json.Marshal(w.Events)
	res, err := s.db.ExecContext(ctx, `UPDATE webhooks SET name = ?, url = ?, enabled = ?, events = ?, secret = ? WHERE team = ? AND id = ?`,
		w.Name, w.URL, w.Enabled, string(types), w.Secret, w.Team, w.ID)
	if err != nil {
		return fmt.Errorf("update webhook: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return webhookNotFound(w.ID)
	}
	return nil
}

// DeleteWebhook implements store.Store.
func (s *Store) DeleteWebhook(ctx context.Context, team, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM webhooks WHERE team = ? AND id = ?`, team, id)
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return webhookNotFound(id)
	}
	return nil
}

// ClaimDeliveries implements store.Store.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.Delivery, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT d.id, d.webhook_id, d.event_id, d.attempt, d.next_at, w.team, w.url, w.secret, e.body, m.metadata
		FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN events e ON e.id = d.event_id
		LEFT JOIN event_metadata m ON m.team = e.team AND m.sum = e.metadata_sum
		WHERE d.next_at <= ? ORDER BY d.next_at LIMIT ?`, now.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	var out []store.Delivery
	for rows.Next() {
		var d store.Delivery
		var next int64
		var metadata []byte
		if err := rows.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.Attempt, &next, &d.Team, &d.URL, &d.Secret, &d.Body, &metadata); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
		if d.Body, err = store.JoinEvent(d.Body, metadata); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim deliveries: event %s: %w", d.EventID, err)
		}
		d.NextAt = time.Unix(0, next).UTC()
		out = append(out, d)
	}
	rows.Close()
	for _, d := range out {
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET next_at = ? WHERE id = ?`, now.Add(lease).UnixNano(), d.ID); err != nil {
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
	}
	return out, tx.Commit()
}

// FinishDelivery implements store.Store.
func (s *Store) FinishDelivery(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM deliveries WHERE id = ?`, id); err != nil {
		return fmt.Errorf("finish delivery: %w", err)
	}
	return nil
}

// RetryDelivery implements store.Store.
func (s *Store) RetryDelivery(ctx context.Context, id string, next time.Time, why string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE deliveries SET attempt = attempt + 1, next_at = ?, last_error = ? WHERE id = ?`, next.UnixNano(), why, id); err != nil {
		return fmt.Errorf("retry delivery: %w", err)
	}
	return nil
}

// WebhookDeliveries implements store.Store.
func (s *Store) WebhookDeliveries(ctx context.Context, team, webhookID string) ([]store.Delivery, error) {
	if _, err := s.Webhook(ctx, team, webhookID); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT d.id, d.event_id, d.attempt, d.next_at, d.last_error, e.body, m.metadata
		FROM deliveries d JOIN events e ON e.id = d.event_id LEFT JOIN event_metadata m ON m.team = e.team AND m.sum = e.metadata_sum
		WHERE d.webhook_id = ? ORDER BY d.next_at, d.id`, webhookID)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		d := store.Delivery{WebhookID: webhookID, Team: team}
		var next int64
		var metadata []byte
		if err := rows.Scan(&d.ID, &d.EventID, &d.Attempt, &next, &d.LastError, &d.Body, &metadata); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		if d.Body, err = store.JoinEvent(d.Body, metadata); err != nil {
			return nil, fmt.Errorf("read deliveries: event %s: %w", d.EventID, err)
		}
		d.NextAt = time.Unix(0, next).UTC()
		out = append(out, d)
	}
	return out, rows.Err()
}

// TemplateSpawns implements store.Store.
func (s *Store) TemplateSpawns(ctx context.Context) (map[string]store.Spawns, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT template_id, count, last_at FROM template_spawns`)
	if err != nil {
		return nil, fmt.Errorf("read template spawns: %w", err)
	}
	defer rows.Close()
	out := map[string]store.Spawns{}
	for rows.Next() {
		var id string
		var n, last int64
		if err := rows.Scan(&id, &n, &last); err != nil {
			return nil, fmt.Errorf("read template spawns: %w", err)
		}
		out[id] = store.Spawns{Count: n, Last: time.Unix(0, last).UTC()}
	}
	return out, rows.Err()
}
