package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// TestWebhookSecretForm: the migration that names the form of webhooks'
// secrets marks those stored before it as given ("plain:"), and leaves
// unsigned webhooks unsigned.
func TestWebhookSecretForm(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, mustSub(migrations, "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	for id, secret := range map[string]string{"signed": "sealed:looks-like-a-form", "unsigned": ""} {
		if _, err := db.ExecContext(ctx, `INSERT INTO webhooks (id, team, name, url, enabled, events, secret, created_at) VALUES (?, 't', '', 'http://a.test/', 1, '[]', ?, 0)`, id, secret); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"signed": "plain:sealed:looks-like-a-form", "unsigned": ""} {
		var got string
		if err := db.QueryRowContext(ctx, `SELECT secret FROM webhooks WHERE id = ?`, id).Scan(&got); err != nil || got != want {
			t.Errorf("webhook %s's secret after the migration: %q %v, want %q", id, got, err, want)
		}
	}
}

// TestEventsStoredWhole: events stored before their metadata was kept
// apart read back as they were stored, and count in their team's totals.
func TestEventsStoredWhole(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, mustSub(migrations, "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	e := store.NewEvent(store.Sandbox{ID: "old", Team: "t", TemplateID: "base", Metadata: map[string]string{"owner": "ana"}},
		store.EventCreated, store.ReasonAPI, time.Unix(1700000000, 0))
	if _, err := db.ExecContext(ctx, `INSERT INTO events (id, team, sandbox_id, type, at, body) VALUES (?, 't', 'old', ?, ?, ?)`,
		e.ID, e.Type, e.Time.UnixNano(), e.Body); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	s := &Store{db: db, limits: store.DefaultLimits}
	got, err := s.Events(ctx, store.EventQuery{Team: "t", Limit: 10})
	if err != nil || len(got) != 1 || string(got[0].Body) != string(e.Body) {
		t.Errorf("an event stored whole, read back: %+v, %v; want %s", got, err, e.Body)
	}
	var events, bytes int
	if err := db.QueryRowContext(ctx, `SELECT events, bytes FROM event_totals WHERE team = 't'`).Scan(&events, &bytes); err != nil ||
		events != 1 || bytes != len(e.Body) {
		t.Errorf("team t's totals: %d events, %d bytes, %v; want 1, %d", events, bytes, err, len(e.Body))
	}
}
