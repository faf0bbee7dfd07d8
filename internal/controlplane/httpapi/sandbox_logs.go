package httpapi

import (
	"cmp"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// Lines a logs request returns by default, and at most.
const (
	logsDefaultLimit = 1000
	logsMaxLimit     = 10000
)

type logLineJSON struct {
	Timestamp time.Time `json:"timestamp"`
	Line      string    `json:"line"`
}

type logEntryJSON struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

func toLogEntry(l store.SandboxLog) logEntryJSON {
	f := l.Fields
	if f == nil {
		f = map[string]string{}
	}
	return logEntryJSON{Timestamp: l.Time.UTC(), Level: l.Level, Message: l.Message, Fields: f}
}

// logLine is a line as text: its level, message and fields (sorted).
func logLine(l store.SandboxLog) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(l.Level) + " " + l.Message)
	for _, k := range slices.Sorted(maps.Keys(l.Fields)) {
		b.WriteString(" " + k + "=" + strconv.Quote(l.Fields[k]))
	}
	return b.String()
}

// logQuery reads the query parameters both forms share: the cursor (ms
// since the epoch) under name, and limit.
func logQuery(r *http.Request, cursorName string) (store.LogQuery, error) {
	q := store.LogQuery{Limit: logsDefaultLimit}
	v := r.URL.Query()
	if s := v.Get(cursorName); s != "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < 0 {
			return q, errs.New(errs.InvalidArgument, "%s must be a unix time in milliseconds: %q", cursorName, s)
		}
		q.Cursor = time.UnixMilli(ms)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, errs.New(errs.InvalidArgument, "limit must be a count: %q", s)
		}
		q.Limit = min(cmp.Or(n, logsDefaultLimit), logsMaxLimit) // 0: the default
	}
	return q, nil
}

// logsV1 serves GET /sandboxes/{id}/logs?start=&limit=: lines from start
// on, oldest first, as text and as entries.
func (a *API) logsV1(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	q, err := logQuery(r, "start")
	if err != nil {
		writeError(w, err)
		return
	}
	lines, err := a.svc.Logs(r.Context(), team(r), id, q)
	if err != nil {
		writeError(w, err)
		return
	}
	out := struct {
		Logs       []logLineJSON  `json:"logs"`
		LogEntries []logEntryJSON `json:"logEntries"`
	}{Logs: []logLineJSON{}, LogEntries: []logEntryJSON{}}
	for _, l := range lines {
		out.Logs = append(out.Logs, logLineJSON{Timestamp: l.Time.UTC(), Line: logLine(l)})
		out.LogEntries = append(out.LogEntries, toLogEntry(l))
	}
	writeJSON(w, http.StatusOK, out)
}

// logsV2 serves GET /v2/sandboxes/{id}/logs?cursor=&direction=&level=&
// limit=&search=: lines from the cursor forward (oldest first) or backward
// (newest first), at or above a level, whose message holds search.
func (a *API) logsV2(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	q, err := logQuery(r, "cursor")
	if err != nil {
		writeError(w, err)
		return
	}
	v := r.URL.Query()
	switch d := v.Get("direction"); d {
	case "", "forward":
	case "backward":
		q.Backward = true
		if !q.Cursor.IsZero() { // the cursor's whole millisecond
			q.Cursor = q.Cursor.Add(time.Millisecond - 1)
		}
	default:
		writeError(w, errs.New(errs.InvalidArgument, "direction must be forward or backward: %q", d))
		return
	}
	if q.Levels, err = service.LevelsFrom(v.Get("level")); err != nil {
		writeError(w, err)
		return
	}
	q.Search = v.Get("search")
	lines, err := a.svc.Logs(r.Context(), team(r), id, q)
	if err != nil {
		writeError(w, err)
		return
	}
	out := struct {
		Logs []logEntryJSON `json:"logs"`
	}{Logs: []logEntryJSON{}}
	for _, l := range lines {
		out.Logs = append(out.Logs, toLogEntry(l))
	}
	writeJSON(w, http.StatusOK, out)
}
