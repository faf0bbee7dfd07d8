package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
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
