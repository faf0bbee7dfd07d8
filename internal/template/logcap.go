package template

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// Bounds of a build's log: what its steps print is kept up to these, in
// the database and in memory, and the status answer pages through it.
const (
	// MaxLogLine caps a line of a step's output (and any log message): the
	// rest of a longer line is dropped and LineCut ends it.
	MaxLogLine = 8 << 10
	// MaxLogEntries and MaxLogBytes (of messages) cap a build's log: past
	// either, one entry says the log was truncated and the rest of the
	// output is dropped. The entry that ends the log always passes.
	MaxLogEntries = 10_000
	MaxLogBytes   = 2 << 20
)

// LogEntryOverhead is what a stored log entry is charged beside its
// message: its keys, time, level and step.
const LogEntryOverhead = 64

// LogPage selects a page of a build's log: the entries from place Offset
// on, at most Limit of them (0: all), of Levels only (nil: all levels).
// With Levels, Offset counts the entries of those levels.
type LogPage struct {
	Offset, Limit int
	Levels        []string
}

// LineCut ends a line that was cut at MaxLogLine.
const LineCut = "…[line truncated]"

// logCap passes a build's log on within its bounds.
type logCap struct {
	out func(LogEntry)

	mu      sync.Mutex
	entries int
	bytes   int
	full    bool // the marker went out: only the final entries pass
}

// CapLog returns a logf that passes entries on to out within MaxLogEntries
// and MaxLogBytes, then one entry saying the log was truncated; the final
// entry always passes. Every message is cut at MaxLogLine and made valid
// UTF-8 without NUL bytes, as a database's text column takes it.
func CapLog(out func(LogEntry)) func(LogEntry) {
	c := &logCap{out: out}
	return c.add
}

func (c *logCap) add(e LogEntry) {
	e.Message = CleanLine(e.Message)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !e.Final {
		if c.full {
			return
		}
		if c.entries+1 > MaxLogEntries || c.bytes+len(e.Message) > MaxLogBytes {
			c.full = true
			e.Level, e.Message = "warn", fmt.Sprintf("log truncated: a build's log keeps at most %d lines and %d MiB; the rest of the build's output is dropped", MaxLogEntries, MaxLogBytes>>20)
		}
	}
	c.entries++
	c.bytes += len(e.Message)
	c.out(e)
}

// CleanLine makes s valid UTF-8 without NUL bytes (a database's text
// column takes nothing else) and, when that is longer than MaxLogLine,
// cuts it to MaxLogLine bytes ending with LineCut. A clean line stays as
// it is.
func CleanLine(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= MaxLogLine {
		return s
	}
	n := MaxLogLine - len(LineCut)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + LineCut
}
