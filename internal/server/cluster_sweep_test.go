package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestClusterNodeSweeps: a node ends, at its next sweep, a sandbox it
// runs that no record names (its record lost while the node was up: a
// replica that failed, an operator's delete), once old enough; recorded
// ones, and young ones a create may still be recording, run on. (Its
// heartbeat reports what placement weighs: its warm sandboxes and the
// templates whose layers it has.)
func TestClusterNodeSweeps(t *testing.T) {
	t.Cleanup(server.SetNodeSweep(200*time.Millisecond, 5*time.Second)) // undone once the roles stopped
	dsn := testutil.Postgres(t)
	n := startRole(t, false, "n1", dsn, "", "", func(c *server.Config) { c.PoolSize = 1 })
	a := startRole(t, true, "api1", dsn, "", "")
	api := srv{url: a.url, dataDir: a.dataDir}
	defer api.killAll(t)
	st, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testkit.Eventually(t, 30*time.Second, func() error {
		ms, err := st.Members(t.Context())
		if err == nil && len(ms) == 1 && ms[0].Warm["base"] == 1 && slices.Contains(ms[0].Cached, "base") {
			return nil
		}
		return fmt.Errorf("the node's heartbeat does not report its warm base sandbox and layers: %+v %v", ms, err)
	})
	var ids []string
	for range 2 {
		code, m, raw := api.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120}`)
		if code != 201 {
			t.Fatalf("create: %d %s", code, raw)
		}
		ids = append(ids, m["sandboxID"].(string))
	}
	lost, kept := ids[0], ids[1]
	if _, err := st.DeleteSandbox(t.Context(), lost); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	time.Sleep(time.Second) // younger than the age: still there
	if !has(testutil.Leftovers(n.dataDir), lost) {
		t.Fatalf("a sandbox younger than the sweep's age was ended: %v", testutil.Leftovers(n.dataDir))
	}
	for has(testutil.Leftovers(n.dataDir), lost) {
		if time.Since(deleted) > 15*time.Second {
			t.Fatalf("the node still runs a sandbox no record names 15 s after: %v", testutil.Leftovers(n.dataDir))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, raw := api.do(t, "GET", "/sandboxes/"+kept, keyA, ""); code != 200 {
		t.Errorf("the recorded sandbox after the sweep: %d %s", code, raw)
	}
}

// has reports whether a node's leftovers hold sandbox id's record.
func has(left []string, id string) bool {
	for _, l := range left {
		if l == "node/"+id+".json" {
			return true
		}
	}
	return false
}
