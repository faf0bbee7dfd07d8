// Package storetest is the suite every store implementation passes.
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
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
)

// Run runs the suite against a fresh, empty store from open.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("APIKeys", func(t *testing.T) {
		s := open(t)
		ctx := context.Background()
		if _, err := s.APIKey(ctx, "nope"); !errs.Is(err, errs.NotFound) {
			t.Errorf("missing key: %v", err)
		}
		k := store.APIKey{Hash: "abc", Team: "t1", Name: "first", CreatedAt: time.Unix(1700000000, 0).UTC()}
		for range 2 { // adding twice is fine
			if err := s.AddAPIKey(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.APIKey(ctx, "abc")
		if err != nil || got != k {
			t.Errorf("key %+v %v, want %+v", got, err, k)
		}
		if n, err := s.CountAPIKeys(ctx); err != nil || n != 1 {
			t.Errorf("count %d %v", n, err)
		}
		later := store.APIKey{Hash: "h2", Team: k.Team, Name: "second", CreatedAt: k.CreatedAt.Add(time.Hour)}
		other := store.APIKey{Hash: "h3", Team: "another", Name: "theirs", CreatedAt: k.CreatedAt}
		for _, x := range []store.APIKey{later, other} {
			if err := s.AddAPIKey(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		keys, err := s.TeamAPIKeys(ctx, k.Team)
		if err != nil || len(keys) != 2 || keys[0].Hash != k.Hash || keys[1] != later {
			t.Errorf("team keys %+v %v", keys, err)
		}
		if err := s.DeleteAPIKey(ctx, k.Team, other.Hash); !errs.Is(err, errs.NotFound) {
			t.Errorf("delete another team's key: %v", err)
		}
		if err := s.DeleteAPIKey(ctx, k.Team, later.Hash); err != nil {
			t.Errorf("delete: %v", err)
		}
		if _, err := s.APIKey(ctx, later.Hash); !errs.Is(err, errs.NotFound) {
			t.Errorf("a deleted key: %v", err)
		}
		if keys, err := s.TeamAPIKeys(ctx, "another"); err != nil || len(keys) != 1 {
			t.Errorf("the other team's keys %+v %v", keys, err)
		}
	})
	t.Run("Teams", func(t *testing.T) {
		s := open(t)
		ctx := context.Background()
		created := time.Unix(1700000000, 0).UTC()
		// A key's team exists once the key does (as the first start's).
		k := store.APIKey{Hash: "k1", Team: "default", Name: "first", CreatedAt: created, Mask: "ab1234"}
		if err := s.AddAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Team(ctx, "default"); err != nil || got.Name != "default" {
			t.Errorf("a key's team: %+v %v", got, err)
		}
		acme := store.Team{ID: "0b6f4c1e-team", Name: "acme", CreatedAt: created.Add(time.Second)}
		if err := s.AddTeam(ctx, acme); err != nil {
			t.Fatal(err)
		}
		for _, dup := range []store.Team{{ID: "other-id", Name: "acme"}, {ID: acme.ID, Name: "fresh"}, {ID: "x", Name: acme.ID}} {
			if err := s.AddTeam(ctx, dup); !errs.Is(err, errs.AlreadyExists) {
				t.Errorf("add %+v: %v, want AlreadyExists", dup, err)
			}
		}
		for _, ref := range []string{acme.ID, "acme"} {
			if got, err := s.Team(ctx, ref); err != nil || got != acme {
				t.Errorf("team %s: %+v %v, want %+v", ref, got, err, acme)
			}
		}
		if _, err := s.Team(ctx, "nope"); !errs.Is(err, errs.NotFound) {
			t.Errorf("an unknown team: %v", err)
		}
		n, cpus, mem, disk, mb := 3, 8, int64(4096), int64(10240), int64(512)
		if err := s.SetTeamQuota(ctx, acme.ID, store.TeamQuota{MaxSandboxes: &n, MaxCPUs: &cpus}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTeamQuota(ctx, acme.ID, store.TeamQuota{MaxMemoryMB: &mem, MaxDiskMB: &disk, MaxStorageMB: &mb}); err != nil {
			t.Fatal(err)
		}
		want := store.Quota{MaxSandboxes: 3, MaxCPUs: 8, MaxMemoryMB: 4096, MaxDiskMB: 10240, MaxStorageMB: 512}
		if got, _ := s.Team(ctx, "acme"); got.Quota != want {
			t.Errorf("quotas: %+v, want %+v", got.Quota, want)
		}
		if err := s.SetTeamQuota(ctx, "nope", store.TeamQuota{MaxSandboxes: &n}); !errs.Is(err, errs.NotFound) {
			t.Errorf("quota of an unknown team: %v", err)
		}
		if teams, err := s.Teams(ctx); err != nil || len(teams) != 2 || teams[0].ID != "default" || teams[1].ID != acme.ID {
			t.Errorf("teams: %+v %v", teams, err)
		}
		// Keys: renamed, touched, listed with their mask.
		ak := store.APIKey{Hash: "k2", Team: acme.ID, Name: "ci", CreatedAt: created, Mask: "cd5678"}
		if err := s.AddAPIKey(ctx, ak); err != nil {
			t.Fatal(err)
		}
		if err := s.RenameAPIKey(ctx, "default", ak.Hash, "stolen"); !errs.Is(err, errs.NotFound) {
			t.Errorf("rename another team's key: %v", err)
		}
		used := created.Add(time.Hour)
		if err := s.RenameAPIKey(ctx, acme.ID, ak.Hash, "deploy"); err != nil {
			t.Fatal(err)
		}
		if err := s.TouchAPIKey(ctx, ak.Hash, used); err != nil {
			t.Fatal(err)
		}
		if got, err := s.APIKey(ctx, ak.Hash); err != nil || got.Name != "deploy" || got.Mask != "cd5678" || !got.LastUsed.Equal(used) {
			t.Errorf("the key after rename and use: %+v %v", got, err)
		}
		// A team with sandboxes stays; without, it goes with its keys.
		sb := store.Sandbox{ID: "s1", Team: acme.ID, TemplateID: "base", State: "running", StartedAt: created, EndAt: created.Add(time.Hour), Metadata: map[string]string{}}
		if err := s.InsertSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTeam(ctx, acme.ID); !errs.Is(err, errs.Conflict) {
			t.Errorf("delete a team with a sandbox: %v, want Conflict", err)
		}
		if _, err := s.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTeam(ctx, acme.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.APIKey(ctx, ak.Hash); !errs.Is(err, errs.NotFound) {
			t.Errorf("a deleted team's key: %v", err)
		}
		if err := s.DeleteTeam(ctx, acme.ID); !errs.Is(err, errs.NotFound) {
			t.Errorf("delete it again: %v", err)
		}
	})
	t.Run("Secret", func(t *testing.T) {
		s := open(t)
		ctx := context.Background()
		calls := 0
		gen := func() ([]byte, error) { calls++; return []byte{byte(calls)}, nil }
		a, err := s.Secret(ctx, "hmac", gen)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Secret(ctx, "hmac", gen)
		if err != nil || string(a) != string(b) || calls != 1 {
			t.Errorf("secret changed: %v %v (%d generations)", a, b, calls)
		}
	})
	t.Run("TeamSecrets", func(t *testing.T) { teamSecrets(t, open(t)) })
	t.Run("Idempotency", func(t *testing.T) { idempotency(t, open(t)) })
	t.Run("BuildLogs", func(t *testing.T) { buildLogs(t, open(t)) })
	t.Run("BuildLogPages", func(t *testing.T) { buildLogPages(t, open(t)) })
	t.Run("EventsAndWebhooks", func(t *testing.T) { eventsAndWebhooks(t, open(t)) })
	t.Run("Sandboxes", func(t *testing.T) {
		s := open(t)
		ctx := context.Background()
		base := time.Unix(1700000000, 0).UTC()
		yes := true
		for i, id := range []string{"a1", "a2", "a3", "a4"} {
			sb := store.Sandbox{ID: id, Team: "t1", TemplateID: "base", State: "running",
				StartedAt: base.Add(time.Duration(i) * time.Second), EndAt: base.Add(time.Hour),
				CPUCount: 2, MemoryMB: 512, DiskMB: 1024, Metadata: map[string]string{"n": id, "kind": []string{"odd", "even"}[i%2]},
				AllowInternetAccess: &yes, Secure: true, EnvdVersion: "0.6.13", PublicTraffic: i%2 == 0, Isolation: "gvisor", AutoResume: i == 1,
				Node: "node-" + id}
			if id == "a4" {
				sb.TemplateID, sb.Alias = "tpl4", "py"
			}
			if err := s.InsertSandbox(ctx, sb); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.InsertSandbox(ctx, store.Sandbox{ID: "a1", Team: "t1", Metadata: map[string]string{}}); !errs.Is(err, errs.AlreadyExists) {
			t.Errorf("duplicate insert: %v", err)
		}
		if err := s.InsertSandbox(ctx, store.Sandbox{ID: "b1", Team: "t2", State: "running", StartedAt: base, EndAt: base}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Sandbox(ctx, "a2")
		if err != nil || got.Metadata["n"] != "a2" || got.AllowInternetAccess == nil || !*got.AllowInternetAccess || !got.StartedAt.Equal(base.Add(time.Second)) || got.PublicTraffic || got.Isolation != "gvisor" || !got.AutoResume || got.Node != "node-a2" {
			t.Errorf("get %+v %v", got, err)
		}
		if err := s.SetSandboxEnd(ctx, "a2", base.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Sandbox(ctx, "a2"); !got.EndAt.Equal(base.Add(2 * time.Hour)) {
			t.Errorf("end not updated: %v", got.EndAt)
		}
		if err := s.SetSandboxSize(ctx, "a2", 3, 1536); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Sandbox(ctx, "a2"); got.CPUCount != 3 || got.MemoryMB != 1536 || got.DiskMB != 1024 {
			t.Errorf("size not updated: %d CPUs, %d MiB memory, %d MiB disk", got.CPUCount, got.MemoryMB, got.DiskMB)
		}
		if err := s.SetSandboxSize(ctx, "nope", 1, 512); !errs.Is(err, errs.NotFound) {
			t.Errorf("size of a missing sandbox: %v", err)
		}
		ids := func(list []store.Sandbox) (out []string) {
			for _, sb := range list {
				out = append(out, sb.ID)
			}
			return out
		}
		page, err := s.ListSandboxes(ctx, store.ListFilter{Team: "t1", Limit: 3})
		if err != nil || len(page) != 3 || page[0].ID != "a4" {
			t.Fatalf("first page %v %v", ids(page), err)
		}
		last := page[len(page)-1]
		rest, err := s.ListSandboxes(ctx, store.ListFilter{Team: "t1", Limit: 3, After: &store.Cursor{StartedAt: last.StartedAt, ID: last.ID}})
		if err != nil || len(rest) != 1 || rest[0].ID != "a1" {
			t.Errorf("second page %v %v", ids(rest), err)
		}
		even, _ := s.ListSandboxes(ctx, store.ListFilter{Team: "t1", Metadata: map[string]string{"kind": "even"}, Ascending: true})
		if got := ids(even); len(got) != 2 || got[0] != "a2" || got[1] != "a4" {
			t.Errorf("metadata filter: %v", got)
		}
		filters := []struct {
			name string
			f    store.ListFilter
			want string
		}{
			{"template by id", store.ListFilter{Templates: []string{"base"}}, "a3 a2 a1"},
			{"template by name", store.ListFilter{Templates: []string{"py"}}, "a4"},
			{"either template", store.ListFilter{Templates: []string{"tpl4", "nope"}}, "a4"},
			{"unknown template", store.ListFilter{Templates: []string{"nope"}}, ""},
			{"started after, inclusive", store.ListFilter{StartedAfter: base.Add(2 * time.Second)}, "a4 a3"},
			{"started after, a nanosecond later", store.ListFilter{StartedAfter: base.Add(2*time.Second + 1)}, "a4"},
			{"started before, inclusive", store.ListFilter{StartedBefore: base.Add(time.Second)}, "a2 a1"},
			{"a window", store.ListFilter{StartedAfter: base.Add(time.Second), StartedBefore: base.Add(2 * time.Second), Ascending: true}, "a2 a3"},
			{"with a page", store.ListFilter{Templates: []string{"base"}, Limit: 1, After: &store.Cursor{StartedAt: base.Add(2 * time.Second), ID: "a3"}}, "a2"},
		}
		for _, tc := range filters {
			tc.f.Team = "t1"
			list, err := s.ListSandboxes(ctx, tc.f)
			if got := strings.Join(ids(list), " "); err != nil || got != tc.want {
				t.Errorf("%s: %q %v, want %q", tc.name, got, err, tc.want)
			}
		}
		none, _ := s.ListSandboxes(ctx, store.ListFilter{Team: "t1", States: []sandboxes.State{sandboxes.StatePaused}})
		if len(none) != 0 {
			t.Errorf("state filter: %v", ids(none))
		}
		if err := s.SetSandboxState(ctx, "a3", sandboxes.StatePaused, base.Add(3*time.Hour)); err != nil {
			t.Fatal(err)
		}
		paused, _ := s.ListSandboxes(ctx, store.ListFilter{Team: "t1", States: []sandboxes.State{sandboxes.StatePaused}})
		if got, _ := s.Sandbox(ctx, "a3"); len(paused) != 1 || paused[0].ID != "a3" || got.State != sandboxes.StatePaused || !got.EndAt.Equal(base.Add(3*time.Hour)) {
			t.Errorf("paused: %v %+v", ids(paused), got)
		}
		if err := s.SetSandboxState(ctx, "nope", sandboxes.StatePaused, base); !errs.Is(err, errs.NotFound) {
			t.Errorf("state of a missing sandbox: %v", err)
		}
		if deleted, err := s.DeleteSandbox(ctx, "a1"); err != nil || !deleted {
			t.Fatalf("delete: %v %v", deleted, err)
		}
		if deleted, err := s.DeleteSandbox(ctx, "a1"); err != nil || deleted {
			t.Errorf("second delete: %v %v", deleted, err)
		}
		if _, err := s.Sandbox(ctx, "a1"); !errs.Is(err, errs.NotFound) {
			t.Errorf("deleted sandbox: %v", err)
		}
		all, err := s.AllSandboxIDs(ctx)
		if err != nil || len(all) != 4 {
			t.Errorf("all ids %v %v", all, err)
		}
	})

	t.Run("SandboxLogs", func(t *testing.T) {
		ctx := context.Background()
		st := open(t)
		t0 := time.Unix(1_700_000_000, 0)
		lines := []store.SandboxLog{
			{SandboxID: "a", Team: "t", Time: t0, Level: "info", Message: "sandbox created", Fields: map[string]string{"template": "base"}},
			{SandboxID: "a", Team: "t", Time: t0.Add(time.Second), Level: "debug", Message: "process started"},
			{SandboxID: "a", Team: "t", Time: t0.Add(2 * time.Second), Level: "warn", Message: "Sandbox Paused"},
			{SandboxID: "a", Team: "t", Time: t0.Add(2 * time.Second), Level: "error", Message: "sandbox ended"},
			{SandboxID: "b", Team: "t", Time: t0, Level: "info", Message: "sandbox created"},
			{SandboxID: "a", Team: "other", Time: t0, Level: "info", Message: "sandbox created"},
		}
		for _, l := range lines {
			if err := st.AddSandboxLog(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name string
			q    store.LogQuery
			want []string
		}{
			{"all", store.LogQuery{}, []string{"sandbox created", "process started", "Sandbox Paused", "sandbox ended"}},
			{"cursor inclusive", store.LogQuery{Cursor: t0.Add(time.Second)}, []string{"process started", "Sandbox Paused", "sandbox ended"}},
			{"backward", store.LogQuery{Backward: true, Limit: 2}, []string{"sandbox ended", "Sandbox Paused"}},
			{"backward from cursor", store.LogQuery{Backward: true, Cursor: t0.Add(time.Second)}, []string{"process started", "sandbox created"}},
			{"levels", store.LogQuery{Levels: []string{"warn", "error"}}, []string{"Sandbox Paused", "sandbox ended"}},
			{"search is case-sensitive", store.LogQuery{Search: "andbox"}, []string{"sandbox created", "Sandbox Paused", "sandbox ended"}},
			{"search", store.LogQuery{Search: "Sandbox"}, []string{"Sandbox Paused"}},
			{"limit", store.LogQuery{Limit: 1}, []string{"sandbox created"}},
			{"other team", store.LogQuery{Team: "nobody"}, nil},
		} {
			q := tc.q
			q.SandboxID = "a"
			if q.Team == "" {
				q.Team = "t"
			}
			got, err := st.SandboxLogs(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var msgs []string
			for _, l := range got {
				msgs = append(msgs, l.Message)
			}
			if strings.Join(msgs, "|") != strings.Join(tc.want, "|") {
				t.Errorf("%s: got %q, want %q", tc.name, msgs, tc.want)
			}
		}
		got, err := st.SandboxLogs(ctx, store.LogQuery{SandboxID: "a", Team: "t", Limit: 1})
		if err != nil || len(got) != 1 || got[0].Fields["template"] != "base" || !got[0].Time.Equal(t0) || got[0].Level != "info" {
			t.Errorf("first line %+v %v", got, err)
		}
		if err := st.PruneSandboxLogs(ctx, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		got, err = st.SandboxLogs(ctx, store.LogQuery{SandboxID: "a", Team: "t"})
		if err != nil || len(got) != 3 {
			t.Errorf("after prune: %d lines %v", len(got), err)
		}
	})
}

// teamSecrets: a team's secrets are found by id or name, listed by name a
// page at a time, updated a version at a time (metadata kept unless
// given), removed, and never seen by another team; a team's removal takes
// its secrets with it.
func teamSecrets(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, team := range []string{"t1", "t2"} {
		if err := s.AddAPIKey(ctx, store.APIKey{Hash: "h" + team, Team: team, Name: team, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	add := func(id, team, name string) {
		t.Helper()
		sec := store.TeamSecret{ID: id, Team: team, Name: name, Version: 1, Metadata: map[string]string{"k": id},
			Sealed: []byte("sealed " + id), CreatedAt: at, UpdatedAt: at}
		if err := s.AddTeamSecret(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	add("sec_1", "t1", "b-key")
	add("sec_2", "t1", "a-key")
	add("sec_3", "t1", "c-key")
	add("sec_4", "t2", "b-key") // the same name in another team
	if err := s.AddTeamSecret(ctx, store.TeamSecret{ID: "sec_5", Team: "t1", Name: "a-key", Version: 1, Sealed: []byte("x"), CreatedAt: at, UpdatedAt: at}); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("a second a-key: %v, want AlreadyExists", err)
	}
	for _, ref := range []string{"sec_1", "b-key"} {
		got, err := s.TeamSecret(ctx, "t1", ref)
		if err != nil || got.ID != "sec_1" || string(got.Sealed) != "sealed sec_1" || got.Metadata["k"] != "sec_1" || !got.CreatedAt.Equal(at) || got.Version != 1 {
			t.Errorf("TeamSecret(t1, %s) = %+v, %v", ref, got, err)
		}
	}
	if _, err := s.TeamSecret(ctx, "t2", "sec_1"); !errs.Is(err, errs.NotFound) {
		t.Errorf("t2 reads t1's secret by id: %v", err)
	}
	var names []string
	for after := ""; ; {
		page, err := s.TeamSecrets(ctx, "t1", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			names = append(names, p.Name)
		}
		after = page[len(page)-1].Name
	}
	if strings.Join(names, ",") != "a-key,b-key,c-key" {
		t.Errorf("t1's secrets by pages of 2: %v", names)
	}
	later := at.Add(time.Minute)
	up, err := s.UpdateTeamSecret(ctx, "t1", "sec_1", []byte("sealed again"), nil, later)
	if err != nil || up.Version != 2 || string(up.Sealed) != "sealed again" || up.Metadata["k"] != "sec_1" || !up.UpdatedAt.Equal(later) || !up.CreatedAt.Equal(at) {
		t.Errorf("update keeping metadata: %+v, %v", up, err)
	}
	up, err = s.UpdateTeamSecret(ctx, "t1", "sec_1", []byte("third"), map[string]string{}, later)
	if err != nil || up.Version != 3 || len(up.Metadata) != 0 {
		t.Errorf("update clearing metadata: %+v, %v", up, err)
	}
	if _, err := s.UpdateTeamSecret(ctx, "t2", "sec_1", []byte("x"), nil, later); !errs.Is(err, errs.NotFound) {
		t.Errorf("t2 updates t1's secret: %v", err)
	}
	if err := s.DeleteTeamSecret(ctx, "t2", "sec_1"); !errs.Is(err, errs.NotFound) {
		t.Errorf("t2 deletes t1's secret: %v", err)
	}
	if err := s.DeleteTeamSecret(ctx, "t1", "sec_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TeamSecret(ctx, "t1", "b-key"); !errs.Is(err, errs.NotFound) {
		t.Errorf("deleted secret still found: %v", err)
	}
	if err := s.DeleteTeam(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAPIKey(ctx, store.APIKey{Hash: "ht2b", Team: "t2", Name: "again", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TeamSecret(ctx, "t2", "b-key"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a removed team's secret outlived it: %v", err)
	}
}

// eventsAndWebhooks: events are listed by team and sandbox, by type, in
// either order and by pages, and pruned by age; an event is due to each
// enabled webhook of its team that asks for its type, once, until it is
// finished; a claim hides a delivery for its lease; a retry counts.
func eventsAndWebhooks(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, team := range []string{"t1", "t2"} {
		if err := s.AddAPIKey(ctx, store.APIKey{Hash: "h" + team, Team: team, Name: team, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	hooks := []store.Webhook{
		{ID: "w1", Team: "t1", Name: "all", URL: "http://a.test/", Enabled: true, Events: store.EventTypes, Secret: "s1", CreatedAt: at},
		{ID: "w2", Team: "t1", Name: "kills", URL: "http://b.test/", Enabled: true, Events: []string{store.EventKilled}, CreatedAt: at.Add(time.Second)},
		{ID: "w3", Team: "t1", Name: "off", URL: "http://c.test/", Enabled: false, Events: store.EventTypes, CreatedAt: at.Add(2 * time.Second)},
		{ID: "w4", Team: "t2", Name: "other team", URL: "http://d.test/", Enabled: true, Events: store.EventTypes, CreatedAt: at},
	}
	for _, w := range hooks {
		if err := s.AddWebhook(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	sb := store.Sandbox{ID: "isb1", Team: "t1", TemplateID: "base", StartedAt: at, CPUCount: 2, MemoryMB: 512, Metadata: map[string]string{"owner": "ana"}}
	var events []store.Event
	for i, typ := range []string{store.EventCreated, store.EventPaused, store.EventResumed, store.EventKilled} {
		e := store.NewEvent(sb, typ, store.ReasonAPI, at.Add(time.Duration(i)*time.Minute))
		events = append(events, e)
		if err := s.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// A log line and its event, in one write.
	other := store.NewEvent(store.Sandbox{ID: "isb2", Team: "t1", TemplateID: "base", StartedAt: at}, store.EventCreated, store.ReasonAPI, at.Add(30*time.Second))
	if err := s.AddSandboxLog(ctx, store.SandboxLog{SandboxID: "isb2", Team: "t1", Time: other.Time, Level: "info", Message: "sandbox created"}, other); err != nil {
		t.Fatal(err)
	}
	if lines, err := s.SandboxLogs(ctx, store.LogQuery{SandboxID: "isb2", Team: "t1", Limit: 10}); err != nil || len(lines) != 1 {
		t.Errorf("the log line written with its event: %v, %v", lines, err)
	}
	// Created events count their template's spawns; no other event does.
	spawns, err := s.TemplateSpawns(ctx)
	if want := (store.Spawns{Count: 2, Last: other.Time}); err != nil || len(spawns) != 1 || spawns["base"].Count != want.Count || !spawns["base"].Last.Equal(want.Last) {
		t.Errorf("template spawns: %+v %v, want base: %+v", spawns, err, want)
	}
	list := func(q store.EventQuery) string {
		t.Helper()
		got, err := s.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range got {
			out = append(out, e.SandboxID+":"+strings.TrimPrefix(e.Type, "sandbox.lifecycle."))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		q    store.EventQuery
		want string
	}{
		{store.EventQuery{Team: "t1", SandboxID: "isb1", Limit: 10}, "isb1:killed,isb1:resumed,isb1:paused,isb1:created"},
		{store.EventQuery{Team: "t1", Limit: 10, Ascending: true}, "isb1:created,isb2:created,isb1:paused,isb1:resumed,isb1:killed"},
		{store.EventQuery{Team: "t1", SandboxID: "isb1", Limit: 2, Offset: 1, Ascending: true}, "isb1:paused,isb1:resumed"},
		{store.EventQuery{Team: "t1", Types: []string{store.EventCreated, store.EventKilled}, Limit: 10}, "isb1:killed,isb2:created,isb1:created"},
		{store.EventQuery{Team: "t2", Limit: 10}, ""},
	} {
		if got := list(tc.q); got != tc.want {
			t.Errorf("Events(%+v) = %s, want %s", tc.q, got, tc.want)
		}
	}
	got, _ := s.Events(ctx, store.EventQuery{Team: "t1", SandboxID: "isb1", Limit: 1})
	if len(got) != 1 || got[0].ID != events[3].ID || string(got[0].Body) != string(events[3].Body) || !got[0].Time.Equal(events[3].Time) {
		t.Errorf("an event read back: %+v, want %+v", got, events[3])
	}
	// Deliveries: w1 takes all five, w2 the kill; w3 (off) and w4 (t2) none.
	now := at.Add(time.Hour)
	claimed, err := s.ClaimDeliveries(ctx, now, time.Minute, 100)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, d := range claimed {
		per[d.WebhookID]++
		if d.WebhookID == "w1" && (d.URL != "http://a.test/" || d.Secret != "s1" || len(d.Body) == 0) {
			t.Errorf("a claimed delivery: %+v", d)
		}
		if i := slices.IndexFunc(events, func(e store.Event) bool { return e.ID == d.EventID }); i >= 0 && string(d.Body) != string(events[i].Body) {
			t.Errorf("a delivery's body %s, want its event's %s", d.Body, events[i].Body)
		}
	}
	if per["w1"] != 5 || per["w2"] != 1 || len(per) != 2 {
		t.Errorf("deliveries by webhook: %v, want w1 5, w2 1", per)
	}
	if again, _ := s.ClaimDeliveries(ctx, now, time.Minute, 100); len(again) != 0 {
		t.Errorf("claimed deliveries claimed again within their lease: %d", len(again))
	}
	for _, d := range claimed[1:] {
		if err := s.FinishDelivery(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RetryDelivery(ctx, claimed[0].ID, now.Add(10*time.Second), "the receiver answered 500"); err != nil {
		t.Fatal(err)
	}
	pending, err := s.WebhookDeliveries(ctx, "t1", claimed[0].WebhookID)
	if err != nil || len(pending) != 1 || pending[0].ID != claimed[0].ID || pending[0].Attempt != 1 ||
		pending[0].LastError != "the receiver answered 500" || !pending[0].NextAt.Equal(now.Add(10*time.Second)) || len(pending[0].Body) == 0 {
		t.Errorf("the webhook's deliveries after a failed attempt: %+v, %v", pending, err)
	}
	if _, err := s.WebhookDeliveries(ctx, "t2", claimed[0].WebhookID); !errs.Is(err, errs.NotFound) {
		t.Errorf("t2 reads t1's webhook's deliveries: %v", err)
	}
	if due, _ := s.ClaimDeliveries(ctx, now.Add(5*time.Second), time.Minute, 100); len(due) != 0 {
		t.Errorf("a retry is due before its time: %d", len(due))
	}
	due, _ := s.ClaimDeliveries(ctx, now.Add(10*time.Second), time.Minute, 100)
	if len(due) != 1 || due[0].ID != claimed[0].ID || due[0].Attempt != 1 {
		t.Errorf("the retried delivery: %+v", due)
	}
	// Webhooks: listed oldest first, updated, deleted with their deliveries.
	ws, err := s.TeamWebhooks(ctx, "t1")
	if err != nil || len(ws) != 3 || ws[0].ID != "w1" || ws[2].ID != "w3" || !slices.Equal(ws[1].Events, []string{store.EventKilled}) {
		t.Errorf("t1's webhooks: %+v, %v", ws, err)
	}
	w := hooks[2]
	w.Enabled, w.Name = true, "on"
	if err := s.UpdateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Webhook(ctx, "t1", "w3"); err != nil || !got.Enabled || got.Name != "on" {
		t.Errorf("updated webhook: %+v, %v", got, err)
	}
	if _, err := s.Webhook(ctx, "t2", "w3"); !errs.Is(err, errs.NotFound) {
		t.Errorf("t2 reads t1's webhook: %v", err)
	}
	if err := s.DeleteWebhook(ctx, "t2", "w1"); !errs.Is(err, errs.NotFound) {
		t.Errorf("t2 deletes t1's webhook: %v", err)
	}
	if err := s.DeleteWebhook(ctx, "t1", "w1"); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.ClaimDeliveries(ctx, now.Add(time.Hour), time.Minute, 100); len(due) != 0 {
		t.Errorf("a deleted webhook's delivery is still due: %+v", due)
	}
	if err := s.PruneEvents(ctx, at.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := list(store.EventQuery{Team: "t1", Limit: 10, Ascending: true}); got != "isb1:resumed,isb1:killed" {
		t.Errorf("after pruning: %s", got)
	}
}

// idempotency: a key claimed once, held while its create runs (by team),
// its answer kept, taken over past its lease or its expiry, answered with
// its sandbox in one transaction, released, abandoned, pruned.
func idempotency(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Unix(1700000000, 0).UTC()
	rec := func(team, key, sum string, at time.Time) store.Idempotent {
		return store.Idempotent{Team: team, Key: key, Sum: sum, LeaseUntil: at.Add(time.Minute), Expires: at.Add(store.IdempotencyKept)}
	}
	claim := func(r store.Idempotent, at time.Time) (store.Idempotent, bool) {
		t.Helper()
		held, ok, err := s.ClaimIdempotent(ctx, r, at)
		if err != nil {
			t.Fatal(err)
		}
		return held, ok
	}
	if _, ok := claim(rec("t1", "k1", "sum-a", now), now); !ok {
		t.Fatal("a new key was not claimed")
	}
	// Held while it runs, whatever the body; another team's key is its own.
	if held, ok := claim(rec("t1", "k1", "sum-b", now), now.Add(time.Second)); ok || held.Status != 0 || held.Sum != "sum-a" {
		t.Errorf("a key in progress: claimed %v, held %+v", ok, held)
	}
	if _, ok := claim(rec("t2", "k1", "sum-b", now), now); !ok {
		t.Error("another team's key was not claimed")
	}
	if err := s.FinishIdempotent(ctx, "t1", store.IdempotentAnswer{Key: "k1", Status: 201, Body: []byte(`{"sandboxID":"i1"}`)}); err != nil {
		t.Fatal(err)
	}
	held, ok := claim(rec("t1", "k1", "sum-a", now), now.Add(time.Hour)) // past the lease: finished ones stay
	if ok || held.Status != 201 || string(held.Body) != `{"sandboxID":"i1"}` || held.Sum != "sum-a" || !held.Expires.Equal(now.Add(store.IdempotencyKept)) {
		t.Errorf("a finished key: claimed %v, held %+v", ok, held)
	}
	// Expired: claimed again, as new.
	if _, ok := claim(rec("t1", "k1", "sum-c", now.Add(25*time.Hour)), now.Add(25*time.Hour)); !ok {
		t.Error("an expired key was not claimed")
	}
	// In progress past its lease (its API process died): taken over.
	if _, ok := claim(rec("t2", "k1", "sum-b", now.Add(2*time.Minute)), now.Add(2*time.Minute)); !ok {
		t.Error("a key past its lease was not taken over")
	}
	// Answered with its sandbox, in one insert.
	claim(rec("t1", "k2", "sum-d", now), now)
	sb := store.Sandbox{ID: "idem1", Team: "t1", TemplateID: "base", State: "running", StartedAt: now, EndAt: now.Add(time.Hour),
		Metadata: map[string]string{}, Answer: &store.IdempotentAnswer{Key: "k2", Status: 201, Body: []byte(`{"sandboxID":"idem1"}`)}}
	if err := s.InsertSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if held, ok := claim(rec("t1", "k2", "sum-d", now), now.Add(time.Hour)); ok || held.Status != 201 || string(held.Body) != `{"sandboxID":"idem1"}` {
		t.Errorf("a key answered with its sandbox: claimed %v, held %+v", ok, held)
	}
	if _, err := s.DeleteSandbox(ctx, "idem1"); err != nil {
		t.Fatal(err)
	}
	// Released: free at once; a finished one is not released.
	claim(rec("t1", "k3", "sum-e", now), now)
	if err := s.ReleaseIdempotent(ctx, "t1", "k3"); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(rec("t1", "k3", "sum-f", now), now); !ok {
		t.Error("a released key was not claimed")
	}
	if err := s.ReleaseIdempotent(ctx, "t1", "k2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(rec("t1", "k2", "sum-d", now), now); ok {
		t.Error("releasing took a finished key's answer")
	}
	// Abandoned: every key in progress goes, the finished stay.
	if err := s.AbandonIdempotent(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(rec("t1", "k3", "sum-g", now), now); !ok {
		t.Error("an abandoned key was not claimed")
	}
	if _, ok := claim(rec("t1", "k2", "sum-d", now), now); ok {
		t.Error("abandoning took a finished key's answer")
	}
	// Pruned once expired.
	if err := s.PruneIdempotent(ctx, now.Add(store.IdempotencyKept+time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(rec("t1", "k2", "sum-z", now), now); !ok {
		t.Error("a pruned key was not claimed")
	}
}

// buildLogs: a build's log written in batches reads back whole and in
// order from any offset; logs older than the age pruned go, newer stay.
func buildLogs(t *testing.T, st store.Store) {
	ctx := context.Background()
	entry := func(i int) template.LogEntry {
		return template.LogEntry{Time: time.Unix(1700000000, int64(i)), Level: "info", Message: fmt.Sprintf("line %d", i), Step: "1"}
	}
	var all []template.LogEntry
	for i := range 5 {
		all = append(all, entry(i))
	}
	if err := st.AppendBuildLog(ctx, "b1", 0, all[:3]); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendBuildLog(ctx, "b1", 3, all[3:]); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendBuildLog(ctx, "b1", 3, all[3:4]); err == nil {
		t.Error("an entry written twice at one place was taken")
	}
	for _, offset := range []int{0, 2, 4, 5, 9} {
		got, err := st.BuildLog(ctx, "b1", template.LogPage{Offset: offset})
		want := all[min(offset, len(all)):]
		if err != nil || len(got) != len(want) {
			t.Fatalf("from %d: %d entries %v, want %d", offset, len(got), err, len(want))
		}
		for i := range got {
			if !got[i].Time.Equal(want[i].Time) || got[i].Message != want[i].Message || got[i].Level != "info" || got[i].Step != "1" {
				t.Errorf("from %d, entry %d: %+v, want %+v", offset, i, got[i], want[i])
			}
		}
	}
	if err := st.AppendBuildLog(ctx, "b2", 0, []template.LogEntry{{Time: time.Now(), Level: "info", Message: "new"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.PruneBuildLogs(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	old, _ := st.BuildLog(ctx, "b1", template.LogPage{})
	recent, _ := st.BuildLog(ctx, "b2", template.LogPage{})
	if len(old) != 0 || len(recent) != 1 {
		t.Errorf("after pruning what is older than an hour: %d old entries, %d recent", len(old), len(recent))
	}
}

// buildLogPages: a build's log reads in pages of a limit, of some levels
// only (the offset then counts those); what builds' logs hold is counted,
// and deleting builds' logs removes those and no other.
func buildLogPages(t *testing.T, st store.Store) {
	ctx := context.Background()
	levels := []string{"info", "warn", "info", "error", "info", "debug", "warn"}
	var all []template.LogEntry
	for i, l := range levels {
		all = append(all, template.LogEntry{Time: time.Unix(1800000000, int64(i)), Level: l, Message: fmt.Sprintf("line %d é", i)})
	}
	if err := st.AppendBuildLog(ctx, "p1", 0, all); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendBuildLog(ctx, "p2", 0, all[:2]); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendBuildLog(ctx, "p3", 0, all[:1]); err != nil {
		t.Fatal(err)
	}
	messages := func(p template.LogPage) string {
		got, err := st.BuildLog(ctx, "p1", p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range got {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(e.Message, "line "), " é"))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		page template.LogPage
		want string
	}{
		{template.LogPage{Limit: 3}, "0,1,2"},
		{template.LogPage{Offset: 3, Limit: 3}, "3,4,5"},
		{template.LogPage{Offset: 6, Limit: 3}, "6"},
		{template.LogPage{Offset: 7, Limit: 3}, ""},
		{template.LogPage{Levels: []string{"warn", "error"}}, "1,3,6"},
		{template.LogPage{Levels: []string{"warn", "error"}, Offset: 1, Limit: 1}, "3"},
		{template.LogPage{Levels: []string{"error"}, Offset: 1}, ""},
	} {
		if got := messages(tc.page); got != tc.want {
			t.Errorf("page %+v: %q, want %q", tc.page, got, tc.want)
		}
	}
	size := func(e template.LogEntry) int64 { return int64(len(e.Message) + template.LogEntryOverhead) }
	var want int64
	for _, e := range all {
		want += size(e)
	}
	want += size(all[0]) + size(all[1])
	if n, err := st.BuildLogBytes(ctx, []string{"p1", "p2", "none"}); err != nil || n != want {
		t.Errorf("the logs of p1 and p2 hold %d bytes (%v), want %d", n, err, want)
	}
	if err := st.DeleteBuildLogs(ctx, []string{"p1", "p2"}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.BuildLogBytes(ctx, []string{"p1", "p2"}); err != nil || n != 0 {
		t.Errorf("after deleting them the logs of p1 and p2 hold %d bytes (%v)", n, err)
	}
	if got, _ := st.BuildLog(ctx, "p3", template.LogPage{}); len(got) != 1 {
		t.Errorf("deleting other builds' logs left p3 %d entries, want 1", len(got))
	}
}
