package server_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/isolation/namespaces/nstest"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

// The namespaces driver runs this test binary as its spawner: nstest
// dispatches its roles first.
func TestMain(m *testing.M) {
	code := nstest.Run(m)
	testutil.StopPostgres()
	testutil.StopObjectStore()
	os.Exit(code)
}

// TestStateInPostgres: with a database the API's state lives in
// PostgreSQL, not in the data directory; a restarted server on it adopts
// its sandboxes; a second server on the same database is refused.
func TestStateInPostgres(t *testing.T) {
	dsn := testutil.Postgres(t)
	dataDir := t.TempDir()
	edit := func(c *server.Config) {
		c.Database, c.DataDir, c.CgroupParent = dsn, dataDir, "cove-test-"+filepath.Base(filepath.Dir(dataDir))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, stop := startStoppable(t, edit)
	code, m, raw := first.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"metadata":{"db":"pg"}}`)
	if code != 201 {
		stop()
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if _, err := os.Stat(filepath.Join(dataDir, "cove.db")); err == nil {
		t.Error("a SQLite database in the data directory of a server on PostgreSQL")
	}
	err := server.Run(ctx, server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Database: dsn, Out: io.Discard,
		CgroupParent: "cove-test-second", LXCFS: "off"}, logx.Discard())
	if err == nil || !strings.Contains(err.Error(), "in use by another cove server") {
		t.Errorf("a second server on the database: %v, want refused", err)
	}
	stop()

	again := startWith(t, edit)
	code, _, raw = again.do(t, "GET", "/v2/sandboxes?metadata=db%3Dpg", keyA, "")
	if code != 200 || !strings.Contains(string(raw), id) {
		t.Errorf("list after the restart: %d %s", code, raw)
	}
	if out, err := run(ctx, again.url, id, tok, "echo adopted"); err != nil || out != "adopted\n" {
		t.Errorf("the sandbox after the restart: %q %v", out, err)
	}
	if code, _, raw := again.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
		t.Errorf("kill: %d %s", code, raw)
	}
	if code, _, _ := again.do(t, "GET", "/sandboxes/"+id, keyA, ""); code != 404 {
		t.Errorf("the killed sandbox: %d, want 404", code)
	}
}
