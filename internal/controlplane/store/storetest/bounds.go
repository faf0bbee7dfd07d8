package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// Usage is what a team's records hold, as a test reads it from the
// database itself, not through the store.
type Usage struct {
	// Rows of idempotency, events, event_metadata, sandbox_logs,
	// deliveries (to the team's webhooks), and of event_totals and
	// log_totals together.
	Keys, Events, Metadata, Lines, Deliveries, Totals int
	// KeyBytes are the keys' answers; EventBytes the events' bodies and
	// their metadata; LogBytes the lines' messages and fields.
	KeyBytes, EventBytes, LogBytes int64
}

// Measure reads a team's Usage.
type Measure func(t *testing.T, team string) Usage

// RunBounds runs the suite of each team's bounds (store.Limits) against
// a fresh, empty store from open, with the measure of its database.
func RunBounds(t *testing.T, open func(t *testing.T) (store.Store, Measure)) {
	t.Run("IdempotencyKeys", func(t *testing.T) {
		s, measure := open(t)
		idempotencyBounds(t, s, measure)
	})
	t.Run("Events", func(t *testing.T) {
		s, measure := open(t)
		eventBounds(t, s, measure)
	})
	t.Run("SandboxLogs", func(t *testing.T) {
		s, measure := open(t)
		logBounds(t, s, measure)
	})
	t.Run("Deliveries", func(t *testing.T) {
		s, measure := open(t)
		deliveryBounds(t, s, measure)
	})
}

// deliveryBounds: the deliveries a team's webhooks have waiting stay
// within its bound, the oldest events' given up first; another team's
// stay.
func deliveryBounds(t *testing.T, s store.Store, measure Measure) {
	ctx := context.Background()
	const max = 20
	s.SetLimits(store.Limits{Deliveries: max})
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, team := range []string{"a", "b"} {
		if err := s.AddTeam(ctx, store.Team{ID: team, Name: team, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"1", "2"} {
			if err := s.AddWebhook(ctx, store.Webhook{ID: team + id, Team: team, Name: id, URL: "http://" + team + ".test/", Enabled: true,
				Events: store.EventTypes, CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	add := func(team string, i int) {
		t.Helper()
		sb := store.Sandbox{ID: fmt.Sprintf("%s%03d", team, i), Team: team, TemplateID: "base", StartedAt: at}
		if err := s.AddEvent(ctx, store.NewEvent(sb, store.EventCreated, store.ReasonAPI, at.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		add("b", i)
	}
	for i := range 50 { // two deliveries each, none taken
		add("a", i)
		if u := measure(t, "a"); u.Deliveries > max {
			t.Fatalf("after %d events team a's webhooks have %d deliveries waiting, at most %d", i+1, u.Deliveries, max)
		}
	}
	if u := measure(t, "b"); u.Deliveries != 6 {
		t.Errorf("team b's deliveries after team a's: %d, want 6", u.Deliveries)
	}
	a1, err := s.WebhookDeliveries(ctx, "a", "a1")
	if err != nil || len(a1) != max/2 {
		t.Fatalf("webhook a1's deliveries: %d, %v; want %d", len(a1), err, max/2)
	}
	events, err := s.Events(ctx, store.EventQuery{Team: "a", Limit: max / 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events { // the newest events' deliveries are the ones left
		if !slices.ContainsFunc(a1, func(d store.Delivery) bool { return d.EventID == e.ID }) {
			t.Errorf("the delivery of %s's event is gone, an older one's kept", e.SandboxID)
		}
	}
}

// logBounds: a team's log lines stay within its rows and bytes, the
// oldest dropped first; another team's lines stay; nothing stays once
// they are pruned.
func logBounds(t *testing.T, s store.Store, measure Measure) {
	ctx := context.Background()
	const maxLines, maxBytes = 100, 16 << 10
	s.SetLimits(store.Limits{IdempotencyKeys: 100, Events: 100, EventBytes: 1 << 20, LogLines: maxLines, LogBytes: maxBytes})
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	line := func(team, id string, i int, msg string) {
		t.Helper()
		if err := s.AddSandboxLog(ctx, store.SandboxLog{SandboxID: id, Team: team, Time: at.Add(time.Duration(i) * time.Second),
			Level: "info", Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		line("b", "b1", i, "sandbox timeout set")
	}
	// Short lines: team a's rows bound it; long ones: its bytes.
	for i := range 300 {
		line("a", fmt.Sprintf("a%03d", i), i, "sandbox timeout set")
		if u := measure(t, "a"); u.Lines > maxLines || u.LogBytes > maxBytes {
			t.Fatalf("after %d lines team a keeps %d lines of %d bytes; at most %d, %d", i+1, u.Lines, u.LogBytes, maxLines, maxBytes)
		}
	}
	if u := measure(t, "a"); u.Lines != maxLines {
		t.Errorf("team a's 300 short lines: %d kept, want the newest %d", u.Lines, maxLines)
	}
	long := strings.Repeat("m", 1000)
	for i := 300; i < 400; i++ {
		line("a", fmt.Sprintf("a%03d", i), i, long)
		if u := measure(t, "a"); u.Lines > maxLines || u.LogBytes > maxBytes {
			t.Fatalf("after %d lines team a keeps %d lines of %d bytes; at most %d, %d", i+1, u.Lines, u.LogBytes, maxLines, maxBytes)
		}
	}
	if got, err := s.SandboxLogs(ctx, store.LogQuery{SandboxID: "a399", Team: "a"}); err != nil || len(got) != 1 || got[0].Message != long {
		t.Errorf("the newest line: %d lines, %v", len(got), err)
	}
	if got, err := s.SandboxLogs(ctx, store.LogQuery{SandboxID: "a000", Team: "a"}); err != nil || len(got) != 0 {
		t.Errorf("the oldest line past the bound: %d lines, %v", len(got), err)
	}
	if u := measure(t, "b"); u.Lines != 10 {
		t.Errorf("team b's lines after team a's: %d, want 10", u.Lines)
	}
	if err := s.PruneSandboxLogs(ctx, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"a", "b"} {
		if u := measure(t, team); u != (Usage{}) {
			t.Errorf("team %s after its lines were pruned: %+v", team, u)
		}
	}
}

// idempotencyBounds: a loop of keyed creates that fail keeps at most the
// team's bound, its newest answers replayed; failures go after 10
// minutes, a success stays its day; another team's keys are untouched;
// keys in progress are never dropped: past the bound with every key in
// progress a claim is QuotaExceeded.
func idempotencyBounds(t *testing.T, s store.Store, measure Measure) {
	ctx := context.Background()
	const max, loop = 50, 300
	s.SetLimits(store.Limits{IdempotencyKeys: max, Events: 1000, EventBytes: 1 << 20})
	now := time.Unix(1700000000, 0).UTC()
	claim := func(team, key string, at time.Time) (store.Idempotent, bool, error) {
		return s.ClaimIdempotent(ctx, store.Idempotent{Team: team, Key: key, Sum: "sum-" + key,
			LeaseUntil: at.Add(10 * time.Minute), Expires: at.Add(store.IdempotencyKept)}, at)
	}
	mustClaim := func(team, key string, at time.Time) {
		t.Helper()
		if _, ok, err := claim(team, key, at); err != nil || !ok {
			t.Fatalf("claim %s's %s: claimed %v, %v", team, key, ok, err)
		}
	}
	key := func(i int) string { return fmt.Sprintf("key-%04d", i) }
	failed := []byte(`{"code":404,"message":"template missing not found"}` + "\n")

	mustClaim("b", "ok", now)
	if err := s.FinishIdempotent(ctx, "b", store.IdempotentAnswer{Key: "ok", Status: 201, Body: []byte(`{"sandboxID":"i1"}`)}); err != nil {
		t.Fatal(err)
	}
	end := now
	for i := range loop {
		end = now.Add(time.Duration(i) * time.Second)
		mustClaim("a", key(i), end)
		if err := s.FinishIdempotent(ctx, "a", store.IdempotentAnswer{Key: key(i), Status: 404, Body: failed,
			Expires: end.Add(store.IdempotencyFailureKept)}); err != nil {
			t.Fatal(err)
		}
		if u := measure(t, "a"); u.Keys > max || u.KeyBytes > max*int64(len(failed)) {
			t.Fatalf("after %d keyed failures team a keeps %d keys, %d bytes; at most %d keys", i+1, u.Keys, u.KeyBytes, max)
		}
	}
	for i := loop - max; i < loop; i++ {
		if held, ok, err := claim("a", key(i), end); err != nil || ok || held.Status != 404 || string(held.Body) != string(failed) {
			t.Errorf("one of the newest keys, %s: claimed %v, held %+v, %v", key(i), ok, held, err)
		}
	}
	if _, ok, err := claim("a", key(0), end); err != nil || !ok {
		t.Errorf("the oldest key, past the bound: claimed %v, %v; want it dropped", ok, err)
	}
	if err := s.ReleaseIdempotent(ctx, "a", key(0)); err != nil {
		t.Fatal(err)
	}
	if held, ok, err := claim("b", "ok", end); err != nil || ok || held.Status != 201 {
		t.Errorf("team b's key after team a's loop: claimed %v, held %+v, %v", ok, held, err)
	}
	// The failures go after 10 minutes; the success stays its day.
	if err := s.PruneIdempotent(ctx, end.Add(store.IdempotencyFailureKept)); err != nil {
		t.Fatal(err)
	}
	if u := measure(t, "a"); u.Keys != 0 {
		t.Errorf("team a's failures 10 minutes on: %d kept", u.Keys)
	}
	if held, ok, err := claim("b", "ok", end.Add(time.Hour)); err != nil || ok || held.Status != 201 {
		t.Errorf("a success an hour on: claimed %v, held %+v, %v", ok, held, err)
	}
	// Keys in progress are not dropped: the bound's next one waits.
	for i := range max {
		mustClaim("c", key(i), now)
	}
	if _, _, err := claim("c", "one-more", now.Add(time.Minute)); !errs.Is(err, errs.QuotaExceeded) {
		t.Errorf("a claim past the bound, every key in progress: %v, want QuotaExceeded", err)
	}
	if held, ok, err := claim("c", key(0), now.Add(time.Minute)); err != nil || ok || held.Status != 0 {
		t.Errorf("a key in progress after the refused claim: claimed %v, held %+v, %v", ok, held, err)
	}
	mustClaim("c", "one-more", now.Add(11*time.Minute)) // past their lease, the others are dead
	if u := measure(t, "c"); u.Keys > max {
		t.Errorf("team c keeps %d keys, at most %d", u.Keys, max)
	}
}

// eventBounds: a team's events and the metadata they carry stay within
// its rows and bytes, the oldest dropped first, the newest read back
// whole; one metadata is stored once for every event that carries it;
// another team's events are untouched; nothing stays once the events
// are pruned, or the team is deleted.
func eventBounds(t *testing.T, s store.Store, measure Measure) {
	ctx := context.Background()
	const maxEvents, maxBytes = 100, 256 << 10
	s.SetLimits(store.Limits{IdempotencyKeys: 100, Events: maxEvents, EventBytes: maxBytes})
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	big := func(n int) map[string]string { // 16 000 bytes, n's own
		m := map[string]string{}
		for k := range 8 {
			m[fmt.Sprintf("key%d", k)] = fmt.Sprintf("%06d", n) + strings.Repeat("x", 1990)
		}
		return m
	}
	types := []string{store.EventCreated, store.EventPaused, store.EventKilled}
	add := func(sb store.Sandbox, from time.Time) []store.Event {
		t.Helper()
		var out []store.Event
		for j, typ := range types {
			e := store.NewEvent(sb, typ, store.ReasonAPI, from.Add(time.Duration(j)*time.Millisecond))
			if err := s.AddEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	var last []store.Event
	for i := range 200 {
		sb := store.Sandbox{ID: fmt.Sprintf("a%03d", i), Team: "a", TemplateID: "base", StartedAt: at, Metadata: big(i)}
		last = add(sb, at.Add(time.Duration(i)*time.Second))
		if u := measure(t, "a"); u.Events > maxEvents || u.EventBytes > maxBytes {
			t.Fatalf("after %d sandboxes team a keeps %d events of %d bytes; at most %d, %d", i+1, u.Events, u.EventBytes, maxEvents, maxBytes)
		}
	}
	got, err := s.Events(ctx, store.EventQuery{Team: "a", SandboxID: "a199", Limit: 10, Ascending: true})
	if err != nil || len(got) != 3 {
		t.Fatalf("the newest sandbox's events: %d, %v", len(got), err)
	}
	for i, e := range got {
		if string(e.Body) != string(last[i].Body) {
			t.Errorf("the newest event read back: %s, want %s", e.Body, last[i].Body)
		}
	}
	if got, err := s.Events(ctx, store.EventQuery{Team: "a", SandboxID: "a000", Limit: 10}); err != nil || len(got) != 0 {
		t.Errorf("the oldest sandbox's events past the bound: %d, %v", len(got), err)
	}
	// One metadata, stored once for team b's 30 sandboxes.
	var first []store.Event
	for i := range 30 {
		sb := store.Sandbox{ID: fmt.Sprintf("b%03d", i), Team: "b", TemplateID: "base", StartedAt: at, Metadata: big(0)}
		if evs := add(sb, at.Add(time.Duration(i)*time.Second)); i == 0 {
			first = evs
		}
	}
	if u := measure(t, "b"); u.Events != 90 || u.Metadata != 1 || u.EventBytes > 16_500+90*1024 {
		t.Errorf("team b's 90 events of one metadata: %+v", u)
	}
	if got, err := s.Events(ctx, store.EventQuery{Team: "b", SandboxID: "b000", Limit: 10, Ascending: true}); err != nil || len(got) != 3 ||
		string(got[0].Body) != string(first[0].Body) {
		t.Errorf("team b's first event read back: %+v, %v; want %s", got, err, first[0].Body)
	}
	// Team a's bytes bound it: no more of its events went than one
	// sandbox's (its metadata and three events) below the bound.
	if u := measure(t, "a"); u.Events > maxEvents || u.EventBytes > maxBytes || u.EventBytes < maxBytes-20_000 {
		t.Errorf("team a after team b's events: %+v, want at most %d events, %d bytes, at least %d", u, maxEvents, maxBytes, maxBytes-20_000)
	}
	// Team e's rows bound it: its newest events stay.
	for i := range 150 {
		sb := store.Sandbox{ID: fmt.Sprintf("e%03d", i), Team: "e", TemplateID: "base", StartedAt: at}
		if err := s.AddEvent(ctx, store.NewEvent(sb, store.EventCreated, store.ReasonAPI, at.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if u := measure(t, "e"); u.Events != maxEvents || u.Metadata != 0 {
		t.Errorf("team e's 150 events: %+v, want the newest %d", u, maxEvents)
	}
	if got, err := s.Events(ctx, store.EventQuery{Team: "e", Limit: 1, Ascending: true}); err != nil || len(got) != 1 || got[0].SandboxID != "e050" {
		t.Errorf("team e's oldest event kept: %+v, %v; want e050's", got, err)
	}
	// Pruned: nothing of the teams stays.
	if err := s.PruneEvents(ctx, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"a", "b", "e"} {
		if u := measure(t, team); u != (Usage{}) {
			t.Errorf("team %s after its events were pruned: %+v", team, u)
		}
	}
	// A team deleted takes its events and keys along.
	if err := s.AddTeam(ctx, store.Team{ID: "d", Name: "d", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	add(store.Sandbox{ID: "d001", Team: "d", TemplateID: "base", StartedAt: at, Metadata: big(1)}, at)
	if _, ok, err := s.ClaimIdempotent(ctx, store.Idempotent{Team: "d", Key: "k", Sum: "s", LeaseUntil: at.Add(time.Minute),
		Expires: at.Add(store.IdempotencyKept)}, at); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if err := s.DeleteTeam(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if u := measure(t, "d"); u != (Usage{}) {
		t.Errorf("a deleted team's records: %+v", u)
	}
}
