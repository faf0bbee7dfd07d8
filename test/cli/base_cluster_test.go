package cli_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.StopPostgres()
	testutil.StopObjectStore()
	os.Exit(code)
}

// TestDebianRecipeCluster: a cluster with --base=debian — two API
// replicas, two nodes, one bucket — builds E2B's base once, on one node,
// from the tests' Debian archive; the other node fetches the build through
// the bucket; the replicas hand base over once both nodes have it warm,
// creates of base through either replica going on meanwhile without a
// failure; then base on every node is E2B's base.
func TestDebianRecipeCluster(t *testing.T) {
	program, release := heldProgram(t, waitingDebootstrap)
	dsn := testutil.Postgres(t)
	c := testutil.StartClusterWith(t, testutil.ClusterConfig{APIKey: key, DSN: dsn, Replicas: 2, Nodes: 2,
		NodeArgs: func(i int) []string {
			return []string{"--network=true", "--network-range", fmt.Sprintf("198.18.%d.0/24", 240+i), "--pool-size", "1",
				"--debian-mirror", testutil.DebianArchiveURL, "--debootstrap", program, "--base=debian"}
		},
		APIArgs: []string{"--base=debian"},
	})
	testutil.ServeDebianArchive(t, testutil.FakeInternet(t)) // after the nodes' networks
	apis := []string{c.APIs[0].URL, c.APIs[1].URL}

	stop := createsAlong(t, apis...)
	os.WriteFile(release, nil, 0o644)
	handed := func(url string) bool {
		_, m, _ := apiDo(t, url, "GET", "/templates/base", "")
		return m["templateID"] == "debian"
	}
	testkit.Wait(6*time.Minute, func() bool {
		_, m, _ := apiDo(t, apis[0], "GET", "/templates/debian", "")
		return handed(apis[0]) && handed(apis[1]) || m["buildStatus"] == "error"
	})
	for _, f := range stop() {
		t.Errorf("a create of base during the build and the hand-over failed: %s", f)
	}
	_, m, raw := apiDo(t, apis[1], "GET", "/templates/debian", "")
	if !handed(apis[0]) || !handed(apis[1]) {
		t.Fatalf("base was not handed to the debian recipe on both replicas: %s\n%s", raw, c.Log())
	}
	if builds, _ := m["builds"].([]any); len(builds) != 1 {
		t.Errorf("the debian recipe was built %d times, want once: %s", len(builds), raw)
	}

	// Every node serves E2B's base: creates go on until each node ran one.
	cl := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+apis[0], "COVE_API_KEY="+key)}
	ran := map[string]bool{}
	for i := 0; len(ran) < 2 && i < 12; i++ {
		code, m, raw := apiDo(t, apis[i%2], "POST", "/sandboxes", `{"templateID":"base","timeout":120}`)
		if code != 201 || m["templateID"] != "debian" {
			t.Fatalf("create of base: %d %s", code, raw)
		}
		id := m["sandboxID"].(string)
		on := nodeOf(t, dsn, id)
		if !ran[on] {
			ran[on] = true
			out, errOut, code := cl.run(t, "", "sandbox", "exec", id, "--", "whoami; python3 --version; test -d /code && sudo -n whoami")
			if want := "user\nPython 3.11"; code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "root\n") {
				t.Errorf("base on node %s: %q %q %d, want E2B's base (%q…root)", on, out, errOut, code, want)
			}
		}
	}
	if len(ran) < 2 {
		t.Errorf("creates of base ran on %v only, want both nodes", ran)
	}
}

// nodeOf names the node a sandbox runs on, as the cluster's records say.
func nodeOf(t *testing.T, dsn, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var node string
	if err := conn.QueryRow(ctx, `SELECT node FROM sandboxes WHERE id = $1`, id).Scan(&node); err != nil {
		t.Fatalf("the node of %s: %v", id, err)
	}
	return node
}
