package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/controlplane/store/storetest"
)

func TestBounds(t *testing.T) {
	storetest.RunBounds(t, func(t *testing.T) (store.Store, storetest.Measure) {
		path := filepath.Join(t.TempDir(), "cove.db")
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return s, func(t *testing.T, team string) storetest.Usage {
			t.Helper()
			var u storetest.Usage
			var bodies, metadata int64
			err := db.QueryRow(`SELECT
				(SELECT count(*) FROM idempotency WHERE team = $1), (SELECT coalesce(sum(length(body)), 0) FROM idempotency WHERE team = $1),
				(SELECT count(*) FROM events WHERE team = $1), (SELECT coalesce(sum(length(body)), 0) FROM events WHERE team = $1),
				(SELECT count(*) FROM event_metadata WHERE team = $1), (SELECT coalesce(sum(length(metadata)), 0) FROM event_metadata WHERE team = $1),
				(SELECT count(*) FROM sandbox_logs WHERE team = $1),
				(SELECT coalesce(sum(length(message) + length(fields)), 0) FROM sandbox_logs WHERE team = $1),
				(SELECT count(*) FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE w.team = $1),
				(SELECT count(*) FROM event_totals WHERE team = $1) + (SELECT count(*) FROM log_totals WHERE team = $1)`, team).
				Scan(&u.Keys, &u.KeyBytes, &u.Events, &bodies, &u.Metadata, &metadata, &u.Lines, &u.LogBytes, &u.Deliveries, &u.Totals)
			if err != nil {
				t.Fatalf("measure team %s: %v", team, err)
			}
			u.EventBytes = bodies + metadata
			return u
		}
	})
}
