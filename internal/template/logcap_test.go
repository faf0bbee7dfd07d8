package template_test

import (
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/template"
)

// TestCapLog: a build's log passes within its bounds of lines and bytes,
// then one marker, then only its final entry; every message is clean.
func TestCapLog(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("z", 1000)
	for _, tc := range []struct {
		name      string
		lines     int
		message   string
		wantLines int // before the marker
	}{
		{"within", 10, "short", 10},
		{"lines", template.MaxLogEntries + 500, "short", template.MaxLogEntries},
		{"bytes", 5000, line, template.MaxLogBytes / len(line)},
		{"huge lines", 1000, strings.Repeat("h", 1<<20), template.MaxLogBytes / template.MaxLogLine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []template.LogEntry
			logf := template.CapLog(func(e template.LogEntry) { got = append(got, e) })
			for range tc.lines {
				logf(template.LogEntry{Level: "info", Message: tc.message})
			}
			logf(template.LogEntry{Level: "info", Message: "build ready", Final: true})
			truncated := tc.wantLines < tc.lines
			want := tc.wantLines + 1
			if truncated {
				want++
			}
			if len(got) != want {
				t.Fatalf("%d entries passed, want %d", len(got), want)
			}
			var bytes int
			for _, e := range got {
				bytes += len(e.Message)
				if len(e.Message) > template.MaxLogLine {
					t.Errorf("a message of %d bytes passed", len(e.Message))
				}
			}
			if bytes > template.MaxLogBytes+1024 {
				t.Errorf("%d bytes of messages passed", bytes)
			}
			marker := got[len(got)-2]
			if truncated != strings.HasPrefix(marker.Message, "log truncated: ") {
				t.Errorf("truncated %v, the entry before the last: %.60q", truncated, marker.Message)
			}
			if last := got[len(got)-1]; !last.Final || last.Message != "build ready" {
				t.Errorf("the last entry: %+v", last)
			}
		})
	}
}

func TestCleanLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"nul\x00 and \xfe", "nul\uFFFD and \uFFFD"},
		{strings.Repeat("a", template.MaxLogLine), strings.Repeat("a", template.MaxLogLine)},
		{strings.Repeat("a", template.MaxLogLine+1), strings.Repeat("a", template.MaxLogLine-len(template.LineCut)) + template.LineCut},
	} {
		got := template.CleanLine(tc.in)
		if got != tc.want || template.CleanLine(got) != got {
			t.Errorf("CleanLine(%.40q…) = %.40q…, want %.40q…", tc.in, got, tc.want)
		}
	}
}
