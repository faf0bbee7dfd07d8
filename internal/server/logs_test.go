package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil/testkit"
)

type logEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// logs reads GET /v2/sandboxes/{id}/logs with query; it fails the test on
// a status other than want.
func (s srv) logs(t *testing.T, key, id, query string, want int) []logEntry {
	t.Helper()
	code, _, raw := s.do(t, "GET", "/v2/sandboxes/"+id+"/logs?"+query, key, "")
	if code != want {
		t.Fatalf("logs ?%s: %d %s", query, code, raw)
	}
	var out struct{ Logs []logEntry }
	if code == 200 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("logs ?%s: %v: %s", query, err, raw)
		}
	}
	return out.Logs
}

func messages(ls []logEntry) string {
	var m []string
	for _, l := range ls {
		m = append(m, l.Message)
	}
	return strings.Join(m, "|")
}

// TestSandboxLogs follows one sandbox's life in its logs (the lifecycle
// lines Cove records and the lines its agent logs), through both of
// E2B's forms and every filter, and reads them again after its end.
func TestSandboxLogs(t *testing.T) {
	s := start(t)
	m := s.create(t, keyA)
	id, token := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if out, err := run(t.Context(), s.url, id, token, "echo logged"); err != nil || out != "logged\n" {
		t.Fatalf("run: %q %v", out, err)
	}
	for _, step := range []struct{ path, body string }{
		{"/timeout", `{"timeout":300}`}, {"/pause", ``}, {"/resume", `{"timeout":120}`},
	} {
		if code, _, raw := s.do(t, "POST", "/sandboxes/"+id+step.path, keyA, step.body); code >= 300 {
			t.Fatalf("%s: %d %s", step.path, code, raw)
		}
	}
	all := s.logs(t, keyA, id, "", 200)
	want := "sandbox created|process started|process ended|sandbox timeout set|sandbox paused|sandbox resumed"
	if got := messages(all); got != want {
		t.Fatalf("log:\n got %s\nwant %s", got, want)
	}
	created, started := all[0], all[1]
	if created.Fields["template"] != "base" || created.Fields["isolation"] == "" || created.Level != "info" {
		t.Errorf("created line %+v", created)
	}
	if started.Fields["source"] != "agent" || started.Fields["cmd"] != "/bin/sh -c echo logged" || started.Fields["pid"] == "" {
		t.Errorf("the agent's line %+v", started)
	}
	if ended := all[2]; ended.Fields["cmd"] != "/bin/sh -c echo logged" || ended.Fields["status"] == "" {
		t.Errorf("the end's line %+v", ended)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Timestamp.Before(all[i-1].Timestamp) {
			t.Errorf("line %d is before line %d", i, i-1)
		}
	}
	// A cursor is a millisecond: the lines from it on, or up to its end.
	cursor := all[3].Timestamp.UnixMilli()
	var from, upTo []logEntry
	for _, l := range all {
		if l.Timestamp.UnixMilli() >= cursor {
			from = append(from, l)
		} else {
			upTo = append([]logEntry{l}, upTo...)
		}
		if l.Timestamp.UnixMilli() == cursor {
			upTo = append([]logEntry{l}, upTo...)
		}
	}
	c := strconv.FormatInt(cursor, 10)
	for _, tc := range []struct{ query, want string }{
		{"direction=backward&limit=2", "sandbox resumed|sandbox paused"},
		{"search=" + url.QueryEscape("sandbox p"), "sandbox paused"},
		{"search=Sandbox", ""}, // case-sensitive
		{"level=warn", ""},
		{"level=debug&limit=1", "sandbox created"},
		{"cursor=" + c, messages(from)},
		{"cursor=" + c + "&direction=backward", messages(upTo)},
	} {
		if got := messages(s.logs(t, keyA, id, tc.query, 200)); got != tc.want {
			t.Errorf("?%s: got %q, want %q", tc.query, got, tc.want)
		}
	}
	for _, q := range []string{"level=loud", "direction=up", "cursor=yesterday", "limit=-1"} {
		s.logs(t, keyA, id, q, 400)
	}
	s.logs(t, keyB, id, "", 404) // another team's
	s.logs(t, keyA, "inosuchsandbox00000", "", 404)

	code, v1, raw := s.do(t, "GET", "/sandboxes/"+id+"/logs?limit=3", keyA, "")
	if code != 200 {
		t.Fatalf("v1 logs: %d %s", code, raw)
	}
	lines, entries := v1["logs"].([]any), v1["logEntries"].([]any)
	if len(lines) != 3 || len(entries) != 3 || !strings.Contains(lines[0].(map[string]any)["line"].(string), `INFO sandbox created`) {
		t.Errorf("v1 logs: %s", raw)
	}

	if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
		t.Fatalf("kill: %d %s", code, raw)
	}
	// The lifecycle outlives the sandbox; its agent's lines went with it.
	if got := messages(s.logs(t, keyA, id, "", 200)); got != "sandbox created|sandbox timeout set|sandbox paused|sandbox resumed|sandbox killed" {
		t.Errorf("after the kill: %s", got)
	}

	// A sandbox that times out ends with a line saying so.
	code, m, raw = s.do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"base","timeout":1}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	short := m["sandboxID"].(string)
	testkit.Eventually(t, 30*time.Second, func() error {
		ls := s.logs(t, keyA, short, "search=ended", 200)
		if len(ls) != 1 {
			return fmt.Errorf("no end line after a 1 s timeout: %s", messages(s.logs(t, keyA, short, "", 200)))
		}
		if ls[0].Fields["reason"] != "destroyed" || ls[0].Fields["detail"] != "timeout" {
			t.Errorf("end line %+v", ls[0])
		}
		return nil
	})
}
