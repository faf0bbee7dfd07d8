package server_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/connguard"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestClusterFlood: a cluster's API replica and node bound the connections
// without a credential as cove server does: 40 silent ones from 127.0.0.2
// to each, of which each holds the 8 its per-address cap allows and closes
// the rest at once, while creates and kills through the replica (which
// reaches the node with its token, from 127.0.0.1) go on. (The node API
// and the replica used to hold every one for 30 s.)
func TestClusterFlood(t *testing.T) {
	t.Parallel()
	dsn := testutil.Postgres(t)
	guarded := func(c *server.Config) {
		c.Unauthenticated = connguard.Limits{PerSource: 8, Wait: time.Minute}
	}
	node := startRole(t, false, "n1", dsn, "", "", guarded)
	api := startRole(t, true, "api1", dsn, "", "", guarded)
	a := srv{url: api.url}
	t.Cleanup(func() { a.killAll(t) })
	a.create(t, keyA) // the replica knows the node

	for _, target := range []string{node.url, api.url} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		conns := testkit.DialFrom(t, "127.0.0.2", u.Host, 40)
		var open int
		if !testkit.Wait(20*time.Second, func() bool { open = testkit.StillOpen(conns, 20*time.Millisecond); return open == 8 }) {
			t.Errorf("%s: %d of 40 connections without a credential held, want 8", target, open)
		}
	}
	if code, m, _ := a.do(t, "GET", "/health", "", ""); code != 200 || m["unauthenticatedConnections"].(map[string]any)["held"].(float64) > 9 {
		t.Errorf("the replica's health under the flood: %d %v", code, m)
	}
	for range 3 {
		sb := a.create(t, keyA)
		if code, _, raw := a.do(t, "DELETE", "/sandboxes/"+sb["sandboxID"].(string), keyA, ""); code != 204 {
			t.Errorf("kill under the flood: %d %s", code, raw)
		}
	}
}
