package server_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/server"
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
}
