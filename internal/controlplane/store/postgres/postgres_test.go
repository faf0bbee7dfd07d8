package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/controlplane/store/storetest"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.StopPostgres()
	testutil.StopObjectStore()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), testutil.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestReplicasStartTogether: API replicas opening one database at once all
// migrate it without error (one at a time), and all get the same secret
// however many generate one at the same moment.
func TestReplicasStartTogether(t *testing.T) {
	dsn := testutil.Postgres(t)
	const replicas = 6
	var wg sync.WaitGroup
	secrets := make([][]byte, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			s, err := postgres.Open(ctx, dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			secrets[i], errs[i] = s.Secret(ctx, "hmac", func() ([]byte, error) { return []byte{byte(i + 1)}, nil })
		}()
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if string(secrets[i]) != string(secrets[0]) {
			t.Errorf("replica %d got secret %v, replica 0 %v", i, secrets[i], secrets[0])
		}
	}
}

// TestMembers: nodes report themselves, age by the database's clock,
// leave; a lost node's sandbox records are forgotten, others' stay.
func TestMembers(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, testutil.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range []store.Member{
		{ID: "n1", URL: "http://10.0.0.1:3100", Drivers: []string{"namespaces", "gvisor"}, CPUs: 8, MemoryMB: 32768, Sandboxes: 1,
			Warm: map[string]int{"base": 3}, Cached: []string{"base", "t1"}, SandboxRange: "198.18.0.0/15"},
		{ID: "n2", URL: "http://10.0.0.2:3100", Drivers: []string{"namespaces"}, CPUs: 4, MemoryMB: 16384},
	} {
		if err := s.Heartbeat(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// A second report replaces the first.
	if err := s.Heartbeat(ctx, store.Member{ID: "n2", URL: "http://10.0.0.2:3100", Drivers: []string{"namespaces"}, CPUs: 4, MemoryMB: 16384,
		CommittedCPUMillis: 2000, CommittedMemoryMB: 1024, Sandboxes: 2}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("members %+v %v", ms, err)
	}
	if m := ms[1]; m.ID != "n2" || m.Sandboxes != 2 || m.CommittedMemoryMB != 1024 || m.Age < 0 || m.Age > 10*time.Second {
		t.Errorf("n2: %+v", m)
	}
	if m := ms[0]; len(m.Drivers) != 2 || m.Drivers[1] != "gvisor" || m.URL != "http://10.0.0.1:3100" ||
		m.Warm["base"] != 3 || strings.Join(m.Cached, " ") != "base t1" || m.SandboxRange != "198.18.0.0/15" {
		t.Errorf("n1: %+v", m)
	}
	if m := ms[1]; len(m.Warm) != 0 || len(m.Cached) != 0 {
		t.Errorf("n2 reported no templates: %+v", m)
	}
	for i, node := range []string{"n1", "n1", "n2", "n1"} {
		id := fmt.Sprintf("s%d", i)
		if err := s.InsertSandbox(ctx, store.Sandbox{ID: id, Team: "t", State: "running", Node: node, Metadata: map[string]string{}}); err != nil {
			t.Fatal(err)
		}
	}
	on, err := s.SandboxesOn(ctx, "n1")
	if sort.Strings(on); err != nil || strings.Join(on, " ") != "s0 s1 s3" {
		t.Errorf("on n1: %v %v", on, err)
	}
	// s3 is paused with its files shared; s1 was, and was resumed.
	for id, state := range map[string][]byte{"s3": []byte(`{"id":"s3"}`), "s1": []byte(`{"id":"s1"}`)} {
		if err := s.SetPausedState(ctx, id, state); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetPausedState(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	if states, err := s.PausedStates(ctx); err != nil || len(states) != 1 || string(states[0]) != `{"id":"s3"}` {
		t.Errorf("paused states: %q %v", states, err)
	}
	ids, err := s.ForgetSandboxesOn(ctx, "n1")
	if sort.Strings(ids); err != nil || strings.Join(ids, " ") != "s0 s1" {
		t.Errorf("forgotten: %v %v", ids, err)
	}
	all, _ := s.AllSandboxIDs(ctx)
	if sort.Strings(all); strings.Join(all, " ") != "s2 s3" {
		t.Errorf("left: %v", all)
	}
	// s3 is on no node, for one replica to move to another.
	if sb, err := s.Sandbox(ctx, "s3"); err != nil || sb.Node != "" {
		t.Errorf("s3 after its node was lost: %+v %v", sb, err)
	}
	for i, want := range []bool{true, false} {
		if moved, err := s.MoveSandbox(ctx, "s3", "", fmt.Sprintf("n%d", i+2)); err != nil || moved != want {
			t.Errorf("move %d: %v %v, want %v", i, moved, err, want)
		}
	}
	if sb, _ := s.Sandbox(ctx, "s3"); sb.Node != "n2" {
		t.Errorf("s3 moved to %q, want n2", sb.Node)
	}
	if state, err := s.PausedState(ctx, "s3"); err != nil || string(state) != `{"id":"s3"}` {
		t.Errorf("s3's state: %q %v", state, err)
	}
	if _, err := s.PausedState(ctx, "nope"); !errs.Is(err, errs.NotFound) {
		t.Errorf("the state of no sandbox: %v", err)
	}
	if err := s.Leave(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if ms, _ := s.Members(ctx); len(ms) != 1 || ms[0].ID != "n2" {
		t.Errorf("after n1 left: %+v", ms)
	}
}

// TestResizeAdmitted: a resize is admitted against the team's other
// sandboxes, its own old size not counted, and recorded only if admitted.
func TestResizeAdmitted(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, testutil.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	team := fmt.Sprintf("resize-%d", time.Now().UnixNano())
	for _, id := range []string{"r1", "r2"} {
		if err := s.InsertSandbox(ctx, store.Sandbox{ID: team + id, Team: team, State: "paused", CPUCount: 1, MemoryMB: 256, DiskMB: 100, Metadata: map[string]string{}}); err != nil {
			t.Fatal(err)
		}
	}
	var seen store.TeamUse
	refuse := errs.New(errs.QuotaExceeded, "team quota")
	if err := s.SetSandboxSizeAdmitted(ctx, team+"r1", team, 2, 1024, func(u store.TeamUse) error { seen = u; return refuse }); !errs.Is(err, errs.QuotaExceeded) {
		t.Fatalf("a refused resize: %v", err)
	}
	if seen != (store.TeamUse{Sandboxes: 1, CPUs: 1, MemoryMB: 256, DiskMB: 100}) {
		t.Errorf("the team's use without the sandbox: %+v", seen)
	}
	if got, _ := s.Sandbox(ctx, team+"r1"); got.CPUCount != 1 || got.MemoryMB != 256 {
		t.Errorf("after a refused resize: %d CPUs, %d MiB", got.CPUCount, got.MemoryMB)
	}
	if err := s.SetSandboxSizeAdmitted(ctx, team+"r1", team, 2, 1024, func(store.TeamUse) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Sandbox(ctx, team+"r1"); got.CPUCount != 2 || got.MemoryMB != 1024 {
		t.Errorf("after the resize: %d CPUs, %d MiB", got.CPUCount, got.MemoryMB)
	}
	if err := s.SetSandboxSizeAdmitted(ctx, team+"nope", team, 2, 1024, func(store.TeamUse) error { return nil }); !errs.Is(err, errs.NotFound) {
		t.Errorf("a missing sandbox's resize: %v", err)
	}
}
