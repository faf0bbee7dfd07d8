package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/template"
)

type buildLogEntry struct {
	Timestamp string `json:"timestamp"`
	Level     string `json:"level"`
	Message   string `json:"message"`
	Step      string `json:"step,omitempty"`
}

type buildReason struct {
	Message    string          `json:"message"`
	Step       string          `json:"step,omitempty"`
	LogEntries []buildLogEntry `json:"logEntries"`
}

// templateBuildInfo is E2B's TemplateBuildInfo.
type templateBuildInfo struct {
	TemplateID string          `json:"templateID"`
	BuildID    string          `json:"buildID"`
	Status     string          `json:"status"`
	Logs       []string        `json:"logs"`
	LogEntries []buildLogEntry `json:"logEntries"`
	Reason     *buildReason    `json:"reason,omitempty"`
}

// A status answer holds at most maxLogPage log entries (E2B's maximum,
// and its default), each at most template.MaxLogLine bytes: a client
// pages through a longer log with logsOffset, as the SDKs do.
const maxLogPage = 100

// logLevels are the levels of a build's log, lowest first.
var logLevels = []string{"debug", "info", "warn", "error"}

// templateBuildStatus serves GET /templates/{templateID}/builds/{buildID}/status?logsOffset=N&limit=N&level=L:
// the build's state and a page of its log, from entry logsOffset on, at
// most limit entries (default and most: maxLogPage), of level L and above
// (then logsOffset counts those).
func (a *API) templateBuildStatus(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := template.LogPage{Limit: maxLogPage}
	for _, f := range []struct {
		name string
		to   *int
		max  int
	}{{"logsOffset", &p.Offset, template.MaxLogEntries + 100}, {"limit", &p.Limit, maxLogPage}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, errs.New(errs.InvalidArgument, "%s must be a number ≥ 0", f.name))
			return
		}
		*f.to = min(n, f.max)
	}
	none := p.Limit == 0 // the state only
	if none {
		p.Limit = 1
	}
	if v := q.Get("level"); v != "" {
		i := slices.Index(logLevels, v)
		if i < 0 {
			writeError(w, errs.New(errs.InvalidArgument, "level must be one of %s", strings.Join(logLevels, ", ")))
			return
		}
		p.Levels = logLevels[i:]
	}
	st, err := a.templates.Status(r.Context(), team(r), r.PathValue("templateID"), r.PathValue("buildID"), p)
	if none {
		st.Logs = nil
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// The log goes once, as logEntries (what the SDKs read); logs, E2B's
	// older form of the same lines, stays empty.
	out := templateBuildInfo{TemplateID: r.PathValue("templateID"), BuildID: st.Build.ID, Status: st.Build.Status,
		Logs: []string{}, LogEntries: []buildLogEntry{}}
	for _, e := range st.Logs {
		out.LogEntries = append(out.LogEntries, buildLogEntry{Timestamp: service.LogTime(e), Level: e.Level, Message: e.Message, Step: e.Step})
	}
	if st.Build.Status == template.StatusError {
		out.Reason = &buildReason{Message: st.Build.Reason, Step: st.Build.ReasonStep, LogEntries: []buildLogEntry{}}
	}
	writeJSON(w, http.StatusOK, out)
}
