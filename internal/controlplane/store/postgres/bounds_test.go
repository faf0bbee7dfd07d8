package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/controlplane/store/storetest"
	"github.com/covesandbox/cove/internal/testutil"
)

func TestBounds(t *testing.T) {
	storetest.RunBounds(t, func(t *testing.T) (store.Store, storetest.Measure) {
		ctx := context.Background()
		dsn := testutil.Postgres(t)
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return s, func(t *testing.T, team string) storetest.Usage {
			t.Helper()
			var u storetest.Usage
			var bodies, metadata int64
			err := conn.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM idempotency WHERE team = $1), (SELECT coalesce(sum(octet_length(body)), 0) FROM idempotency WHERE team = $1),
				(SELECT count(*) FROM events WHERE team = $1), (SELECT coalesce(sum(octet_length(body)), 0) FROM events WHERE team = $1),
				(SELECT count(*) FROM event_metadata WHERE team = $1), (SELECT coalesce(sum(octet_length(metadata)), 0) FROM event_metadata WHERE team = $1),
				(SELECT count(*) FROM sandbox_logs WHERE team = $1),
				(SELECT coalesce(sum(octet_length(message) + octet_length(fields::text)), 0) FROM sandbox_logs WHERE team = $1),
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
