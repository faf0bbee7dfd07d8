package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestClusterTeamQuota: a team's quota on the API replicas holds over
// every node and both replicas at once — of creates made together, as
// many succeed as the quota lets, the others are 429 and leave nothing on
// any node; a sandbox killed makes room again.
func TestClusterTeamQuota(t *testing.T) {
	dsn := testutil.Postgres(t)
	var nodes []role
	for i := range 2 {
		nodes = append(nodes, startRole(t, false, fmt.Sprintf("n%d", i+1), dsn, "", ""))
	}
	quota := func(c *server.Config) { c.Admission.Team.Sandboxes = 3 }
	var apis []srv
	for i := range 2 {
		r := startRole(t, true, fmt.Sprintf("api%d", i+1), dsn, "", "", quota)
		apis = append(apis, srv{url: r.url, dataDir: r.dataDir})
	}
	defer apis[0].killAll(t)

	var mu sync.Mutex
	var made []string
	refused := 0
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			code, m, raw := apis[i%2].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":60}`)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == 201:
				made = append(made, m["sandboxID"].(string))
			case code == 429 && strings.Contains(string(raw), "team quota"):
				refused++
			default:
				t.Errorf("create: %d %s", code, raw)
			}
		})
	}
	wg.Wait()
	if len(made) != 3 || refused != 5 {
		t.Fatalf("8 creates at once with a quota of 3: %d made, %d refused", len(made), refused)
	}
	var left []string
	for _, n := range nodes {
		left = append(left, testutil.Leftovers(n.dataDir)...)
	}
	if recs := strings.Count(strings.Join(left, " "), ".json"); recs != 3 {
		t.Errorf("the nodes hold %d sandboxes, want the 3 admitted: %v", recs, left)
	}
	if code, _, raw := apis[1].do(t, "DELETE", "/sandboxes/"+made[0], keyA, ""); code != 204 {
		t.Fatalf("kill: %d %s", code, raw)
	}
	if code, _, raw := apis[1].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":60}`); code != 201 {
		t.Errorf("a create after a kill made room: %d %s", code, raw)
	}
	if code, _, raw := apis[0].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":60}`); code != 429 {
		t.Errorf("a create past the quota again: %d %s", code, raw)
	}
}
