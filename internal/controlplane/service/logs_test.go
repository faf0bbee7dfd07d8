package service

import (
	"fmt"
	"testing"
	"time"
)

func TestParseAgentLog(t *testing.T) {
	raw := []byte(`{"time":"2026-12-01T10:00:00.5Z","level":"INFO","msg":"process started","pid":42,"cmd":"/bin/sh"}
{"time":"2026-12-01T10:00:01Z","level":"WARN+2","msg":"gzip download","path":"/a b"}

{"time":"2026-12-01T10:00:02Z","level":"ERROR","msg":"sudo socket"}
log capped at 8388608 bytes
`)
	got := parseAgentLog("i1", "t", raw)
	for i, want := range []struct {
		level, msg, field, value string
		at                       time.Time
	}{
		{"info", "process started", "pid", "42", time.Date(2026, 12, 1, 10, 0, 0, 5e8, time.UTC)},
		{"warn", "gzip download", "path", "/a b", time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)},
		{"error", "sudo socket", "source", "agent", time.Date(2026, 12, 1, 10, 0, 2, 0, time.UTC)},
		{"info", "log capped at 8388608 bytes", "source", "agent", time.Time{}},
	} {
		if i >= len(got) {
			t.Fatalf("%d lines, want 4", len(got))
		}
		l := got[i]
		if l.Level != want.level || l.Message != want.msg || l.Fields[want.field] != want.value || !l.Time.Equal(want.at) || l.SandboxID != "i1" || l.Team != "t" {
			t.Errorf("line %d: %+v", i, l)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d lines, want 4", len(got))
	}
}

func TestLevelsFrom(t *testing.T) {
	for _, tc := range []struct {
		min, want string
		bad       bool
	}{
		{"", "[]", false},
		{"debug", "[debug info warn error]", false},
		{"warn", "[warn error]", false},
		{"error", "[error]", false},
		{"WARN", "", true},
		{"fatal", "", true},
	} {
		got, err := LevelsFrom(tc.min)
		if (err != nil) != tc.bad || (!tc.bad && fmt.Sprint(got) != tc.want) {
			t.Errorf("LevelsFrom(%q) = %v, %v", tc.min, got, err)
		}
	}
}
