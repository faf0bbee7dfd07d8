package node

import (
	"bytes"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/template"
)

func TestLineSplitter(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", template.MaxLogLine+100)
	cut := strings.Repeat("x", template.MaxLogLine-len(template.LineCut)) + template.LineCut
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"a line over chunks", []string{"ab", "c\nd", "e\n"}, []string{"abc", "de"}},
		{"crlf", []string{"a\r\n\r\n"}, []string{"a", ""}},
		{"last line without newline", []string{"a\nb"}, []string{"a", "b"}},
		{"a long line cut", []string{long[:5000], long[5000:] + "\nnext\n"}, []string{cut, "next"}},
		{"exactly the cap", []string{long[:template.MaxLogLine] + "\n"}, []string{long[:template.MaxLogLine]}},
		{"a rune at the cut", []string{strings.Repeat("é", template.MaxLogLine) + "\n"},
			[]string{strings.Repeat("é", (template.MaxLogLine-len(template.LineCut))/2) + template.LineCut}},
		{"binary made valid", []string{"a\x00\xffb\n"}, []string{"a\uFFFD\uFFFDb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			l := &lineSplitter{out: func(s string) { got = append(got, s) }}
			for _, c := range tc.chunks {
				l.write([]byte(c))
			}
			l.flush()
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %d lines %.80q…, want %d %.80q…", len(got), got, len(tc.want), tc.want)
			}
			for _, line := range got {
				if len(line) > template.MaxLogLine {
					t.Errorf("a line of %d bytes passed on", len(line))
				}
			}
		})
	}
}

// TestLineSplitterHugeLine: a 200 MB line with no newline, in the chunks
// a process's output comes in, is held to one capped line: what the
// splitter allocates stays within a few lines' worth, whatever the line's
// length (the splitter once grew a buffer to the whole line and scanned
// it again at every chunk).
func TestLineSplitterHugeLine(t *testing.T) {
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	var lines []string
	l := &lineSplitter{out: func(s string) { lines = append(lines, s) }}
	const total = 200 << 20
	const bound = 1 << 20 // allocated by the splitter, at most
	var before, now runtime.MemStats
	runtime.ReadMemStats(&before)
	for sent := 0; sent < total; sent += len(chunk) {
		l.write(chunk)
		if sent%(16<<20) == 0 {
			runtime.ReadMemStats(&now)
			if grew := now.TotalAlloc - before.TotalAlloc; grew > bound {
				t.Fatalf("after %d MiB of one line the splitter allocated %d KiB", sent>>20, grew>>10)
			}
		}
	}
	l.write([]byte("\nafter\n"))
	l.flush()
	runtime.ReadMemStats(&now)
	if grew := now.TotalAlloc - before.TotalAlloc; grew > bound {
		t.Errorf("a 200 MiB line made the splitter allocate %d KiB", grew>>10)
	}
	if cap(l.line) > 2*template.MaxLogLine {
		t.Errorf("the splitter holds a buffer of %d bytes", cap(l.line))
	}
	if len(lines) != 2 || !strings.HasSuffix(lines[0], template.LineCut) || len(lines[0]) != template.MaxLogLine || lines[1] != "after" {
		t.Errorf("lines: %d, the first %d bytes ending %q", len(lines), len(lines[0]), lines[0][max(0, len(lines[0])-30):])
	}
	allocs := testing.AllocsPerRun(100, func() { l.write(chunk) })
	if allocs > 0 {
		t.Errorf("a chunk of a cut line allocated %.0f times", allocs)
	}
}
