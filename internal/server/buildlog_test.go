package server_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestBuildLogKept: a build's log is kept past the build and the server's
// restart (its database), read whole and from an offset.
func TestBuildLogKept(t *testing.T) {
	dataDir := t.TempDir()
	edit := func(c *server.Config) {
		c.DataDir, c.CgroupParent = dataDir, "cove-test-"+filepath.Base(dataDir)
	}
	first, stop := startStoppable(t, edit)
	code, m, raw := first.do(t, "POST", "/v3/templates", keyA, `{"name":"logged"}`)
	if code != 202 {
		t.Fatalf("template: %d %s", code, raw)
	}
	id, build := m["templateID"].(string), m["buildID"].(string)
	buildTemplate(t, first, first, id, build, `{"fromTemplate":"base","steps":[{"type":"RUN","args":["echo kept-line-one; echo kept-line-two"]}]}`)
	status := "/templates/" + id + "/builds/" + build + "/status"
	messages := func(s srv, query string) []string {
		t.Helper()
		code, m, raw := s.do(t, "GET", status+query, keyA, "")
		if code != 200 {
			t.Fatalf("status%s: %d %s", query, code, raw)
		}
		var out []string
		for _, e := range m["logEntries"].([]any) {
			out = append(out, fmt.Sprint(e.(map[string]any)["message"]))
		}
		return out
	}
	before := messages(first, "")
	if !strings.Contains(strings.Join(before, "\n"), "kept-line-two") {
		t.Fatalf("the build's log: %q", before)
	}
	stop()

	second := startWith(t, edit)
	after := messages(second, "")
	if strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("after a restart the log is %q, was %q", after, before)
	}
	if tail := messages(second, "?logsOffset=2"); len(tail) != len(before)-2 || tail[0] != before[2] {
		t.Errorf("from offset 2: %q of %q", tail, before)
	}

	// A second build: while it runs, the first serves, and the template
	// says so (servingBuildID); then the second serves.
	code, m, raw = second.do(t, "POST", "/v3/templates", keyA, `{"name":"logged"}`)
	if code != 202 || m["templateID"] != id {
		t.Fatalf("a second build: %d %s", code, raw)
	}
	rebuild := m["buildID"].(string)
	if code, _, raw := second.do(t, "POST", "/v2/templates/"+id+"/builds/"+rebuild, keyA, `{"fromTemplate":"base","steps":[{"type":"RUN","args":["sleep 2"]}]}`); code != 202 {
		t.Fatalf("start the second build: %d %s", code, raw)
	}
	if _, info, _ := second.do(t, "GET", "/templates/"+id, keyA, ""); info["buildID"] != rebuild || info["servingBuildID"] != build ||
		(info["buildStatus"] != "building" && info["buildStatus"] != "waiting") {
		t.Errorf("while it rebuilds: buildID %v (%v), serving %v; want %s building, serving %s", info["buildID"], info["buildStatus"], info["servingBuildID"], rebuild, build)
	}
	testkit.Eventually(t, 2*time.Minute, func() error {
		if _, st, _ := second.do(t, "GET", "/templates/"+id+"/builds/"+rebuild+"/status", keyA, ""); st["status"] != "ready" {
			return fmt.Errorf("the second build: %v", st)
		}
		return nil
	})
	if _, info, _ := second.do(t, "GET", "/templates/"+id, keyA, ""); info["servingBuildID"] != rebuild {
		t.Errorf("once rebuilt: serving %v, want %s", info["servingBuildID"], rebuild)
	}
}

// TestTemplateSpawns: a template's spawnCount and lastSpawnedAt count the
// sandboxes it started, across the server's restart; the built-in base has
// a real createdAt.
func TestTemplateSpawns(t *testing.T) {
	dataDir := t.TempDir()
	edit := func(c *server.Config) {
		c.DataDir, c.CgroupParent = dataDir, "cove-test-"+filepath.Base(dataDir)
	}
	first, stop := startStoppable(t, edit)
	before := time.Now().UTC().Add(-time.Second)
	for range 2 {
		id := first.create(t, keyA)["sandboxID"].(string)
		first.do(t, "DELETE", "/sandboxes/"+id, keyA, "")
	}
	stop()
	second := startWith(t, edit)
	second.create(t, keyA)
	_, info, raw := second.do(t, "GET", "/templates/base", keyA, "")
	last, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(info["lastSpawnedAt"]))
	created, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(info["createdAt"]))
	if info["spawnCount"] != float64(3) || last.Before(before) || created.IsZero() || created.Year() < 2000 {
		t.Errorf("base: spawnCount %v, lastSpawnedAt %v, createdAt %v: %s", info["spawnCount"], info["lastSpawnedAt"], info["createdAt"], raw)
	}
	_, _, raw = second.do(t, "GET", "/templates", keyA, "")
	var list []map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("list: %v: %s", err, raw)
	}
	for _, tpl := range list {
		if tpl["templateID"] == "base" && tpl["spawnCount"] != float64(3) {
			t.Errorf("base in the list: spawnCount %v", tpl["spawnCount"])
		}
	}
}
