package server_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestPauseSurvivesRestart: a sandbox paused with its memory stays paused
// across a server restart (frozen, not running, listed as paused) and a
// connect to the new server resumes it where it was (201), on each driver.
func TestPauseSurvivesRestart(t *testing.T) {
	for _, isolation := range []string{"namespaces", "gvisor"} {
		t.Run(isolation, func(t *testing.T) {
			runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
			if isolation == "gvisor" && (runsc == "" || agent == "") {
				t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
			}
			dataDir := t.TempDir()
			edit := func(c *server.Config) {
				c.DataDir, c.CgroupParent, c.Runsc, c.SandboxBinary = dataDir, "cove-test-"+filepath.Base(dataDir), runsc, agent
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			first, stop := startStoppable(t, edit)
			code, m, raw := first.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"metadata":{"cove.isolation":"`+isolation+`"}}`)
			if code != 201 {
				t.Fatalf("create: %d %s", code, raw)
			}
			id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
			if _, err := run(ctx, first.url, id, tok, "(n=0; while :; do n=$((n+1)); echo $n > /tmp/count; sleep 0.05; done) >/dev/null 2>&1 &"); err != nil {
				t.Fatal(err)
			}
			count := func(s srv) int {
				t.Helper()
				out, err := run(ctx, s.url, id, tok, "sleep 0.2; cat /tmp/count")
				n, cerr := strconv.Atoi(strings.TrimSpace(out))
				if err != nil || cerr != nil {
					t.Fatalf("read the counter: %q %v", out, err)
				}
				return n
			}
			before := count(first)
			if code, _, raw := first.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{"memory":true}`); code != 204 {
				t.Fatalf("pause: %d %s", code, raw)
			}
			stop()
			time.Sleep(time.Second) // 20 counts, were it not frozen

			second := startWith(t, edit)
			if code, info, raw := second.do(t, "GET", "/sandboxes/"+id, keyA, ""); code != 200 || info["state"] != "paused" {
				t.Fatalf("after the restart: %d %s", code, raw)
			}
			if code, _, raw := second.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 201 {
				t.Fatalf("connect to resume: %d %s", code, raw)
			}
			if after := count(second); after < before || after-before > 30 {
				t.Errorf("the counter went from %d to %d across a pause of over a second and a restart", before, after)
			}
			if code, _, raw := second.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
				t.Errorf("kill: %d %s", code, raw)
			}
			if left := testutil.Leftovers(dataDir); len(left) > 0 {
				t.Errorf("left after the kill: %v", left)
			}
		})
	}
}
