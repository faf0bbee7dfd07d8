package template

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/logx"
)

// LogStore keeps builds' logs past their builds (the control plane's
// database): where every API replica of a cluster reads them, and where a
// single server shows them after its restarts.
type LogStore interface {
	AppendBuildLog(ctx context.Context, buildID string, from int, entries []LogEntry) error
	PruneBuildLogs(ctx context.Context, age time.Duration) error
}

// LogKeep is how long a finished build's log is kept.
const LogKeep = 7 * 24 * time.Hour

// LogSink writes a build's log to a LogStore in batches: every 200 ms or
// 500 entries, and at once at its final entry, so that a replica that
// reads the build ended reads its whole log.
type LogSink struct {
	logs    LogStore
	buildID string
	log     *slog.Logger

	mu      sync.Mutex
	pending []LogEntry
	written int // entries stored
	timer   *time.Timer
	failed  bool
}

// NewLogSink returns a sink for the log of build buildID.
func NewLogSink(logs LogStore, buildID string, log *slog.Logger) *LogSink {
	return &LogSink{logs: logs, buildID: buildID, log: log}
}

// Add takes an entry; it is stored within 200 ms.
func (k *LogSink) Add(e LogEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending = append(k.pending, e)
	switch {
	case e.Final || len(k.pending) >= 500:
		k.flush()
	case k.timer == nil:
		k.timer = time.AfterFunc(200*time.Millisecond, func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			k.flush()
		})
	}
}

// flush stores what is pending (under k.mu).
func (k *LogSink) flush() {
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	if len(k.pending) == 0 || k.failed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.logs.AppendBuildLog(ctx, k.buildID, k.written, k.pending); err != nil {
		// Later entries would leave a gap: the log stops here.
		k.failed = true
		k.log.Error("store a build's log; the rest of it is lost", "build", k.buildID, logx.Err(err))
		return
	}
	k.written += len(k.pending)
	k.pending = k.pending[:0]
}

// Close stores what is pending.
func (k *LogSink) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.flush()
}
