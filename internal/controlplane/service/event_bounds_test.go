package service_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/nodefake"
)

// TestEventsBounded: sandboxes with 16 KiB of metadata each, created and
// killed, keep their team's events within its bytes; the metadata is
// stored once, not in every event, and read back whole; another team's
// events stay; nothing stays once the events are pruned.
func TestEventsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cove.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const maxBytes = 128 << 10
	st.SetLimits(store.Limits{IdempotencyKeys: 100, Events: 1000, EventBytes: maxBytes})
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := func(team string) (rows int, bytes int64) {
		t.Helper()
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM events WHERE team = $1),
			(SELECT coalesce(sum(length(body)), 0) FROM events WHERE team = $1) +
			(SELECT coalesce(sum(length(metadata)), 0) FROM event_metadata WHERE team = $1)`, team).Scan(&rows, &bytes); err != nil {
			t.Fatal(err)
		}
		return rows, bytes
	}
	svc := service.New(service.Config{}, st, nodefake.New(secret), secret, slog.New(slog.DiscardHandler))
	metadata := func(n int) map[string]string { // 16 KiB, n's own
		m := map[string]string{}
		for k := range 8 {
			m[fmt.Sprintf("k%d", k)] = fmt.Sprintf("%06d", n) + strings.Repeat("x", service.MaxMetadataValBytes-8)
		}
		return m
	}
	run := func(team string, md map[string]string) string {
		t.Helper()
		sb := create(t, svc, func(r *service.CreateRequest) { r.Team, r.Metadata = team, md })
		if err := svc.Kill(ctx, team, sb.ID); err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}

	// Team b: 40 sandboxes of one metadata store it once.
	for range 40 {
		run("b", metadata(0))
	}
	if rows, bytes := stored("b"); rows != 80 || bytes > 16<<10+80*1024 {
		t.Errorf("team b's 80 events of one 16 KiB metadata: %d rows of %d bytes; want its metadata stored once", rows, bytes)
	}
	// Team a: each sandbox its own metadata; its bytes stay bounded.
	var last string
	for i := range 40 {
		last = run("a", metadata(i+1))
		if rows, bytes := stored("a"); bytes > maxBytes {
			t.Fatalf("after %d sandboxes team a stores %d events of %d bytes, at most %d", i+1, rows, bytes, maxBytes)
		}
	}
	events, err := svc.Events(ctx, service.EventQuery{Team: "a", SandboxID: last, Limit: 10})
	if err != nil || len(events) != 2 {
		t.Fatalf("the last sandbox's events: %d, %v", len(events), err)
	}
	var body struct {
		EventData struct {
			Metadata map[string]string `json:"sandbox_metadata"`
		} `json:"eventData"`
	}
	if err := json.Unmarshal(events[0].Body, &body); err != nil || body.EventData.Metadata["k7"] != metadata(40)["k7"] {
		t.Errorf("the newest event's metadata: %v (%d keys)", err, len(body.EventData.Metadata))
	}
	if rows, _ := stored("b"); rows != 80 {
		t.Errorf("team b's events after team a's: %d, want 80", rows)
	}
	if err := st.PruneEvents(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"a", "b"} {
		if rows, bytes := stored(team); rows != 0 || bytes != 0 {
			t.Errorf("team %s after its events were pruned: %d rows, %d bytes", team, rows, bytes)
		}
	}
}

// TestUpdatesBounded: a loop of timeout changes on one sandbox, each a
// log line and an event, keeps the team's newest lines and events
// within its bounds, readable.
func TestUpdatesBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cove.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const max = 50
	st.SetLimits(store.Limits{Events: max, LogLines: max})
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := service.New(service.Config{}, st, nodefake.New(secret), secret, slog.New(slog.DiscardHandler))
	sb := create(t, svc, nil)
	for i := range 4 * max {
		if err := svc.SetTimeout(ctx, sb.Team, sb.ID, time.Minute); err != nil {
			t.Fatal(err)
		}
		var lines, events int
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM sandbox_logs WHERE team = $1), (SELECT count(*) FROM events WHERE team = $1)`,
			sb.Team).Scan(&lines, &events); err != nil {
			t.Fatal(err)
		}
		if lines > max || events > max {
			t.Fatalf("after %d timeout changes the team keeps %d log lines and %d events, at most %d", i+1, lines, events, max)
		}
	}
	lines, err := svc.Logs(ctx, sb.Team, sb.ID, store.LogQuery{Backward: true, Limit: 1})
	if err != nil || len(lines) != 1 || lines[0].Message != "sandbox timeout set" {
		t.Errorf("the newest line: %+v, %v", lines, err)
	}
	if events, err := svc.Events(ctx, service.EventQuery{Team: sb.Team, Limit: 1}); err != nil || len(events) != 1 || events[0].Type != store.EventUpdated {
		t.Errorf("the newest event: %+v, %v", events, err)
	}
}
