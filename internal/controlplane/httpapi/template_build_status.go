package httpapi

import (
	"net/http"
	"strconv"

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

// templateBuildStatus serves GET /templates/{templateID}/builds/{buildID}/status?logsOffset=N.
func (a *API) templateBuildStatus(w http.ResponseWriter, r *http.Request) {
	offset := 0
	if v := r.URL.Query().Get("logsOffset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, errs.New(errs.InvalidArgument, "logsOffset must be a number ≥ 0"))
			return
		}
		offset = n
	}
	st, err := a.templates.Status(r.Context(), team(r), r.PathValue("templateID"), r.PathValue("buildID"), offset)
	if err != nil {
		writeError(w, err)
		return
	}
	out := templateBuildInfo{TemplateID: r.PathValue("templateID"), BuildID: st.Build.ID, Status: st.Build.Status,
		Logs: []string{}, LogEntries: []buildLogEntry{}}
	for _, e := range st.Logs {
		out.LogEntries = append(out.LogEntries, buildLogEntry{Timestamp: service.LogTime(e), Level: e.Level, Message: e.Message, Step: e.Step})
		out.Logs = append(out.Logs, e.Message)
	}
	if st.Build.Status == template.StatusError {
		out.Reason = &buildReason{Message: st.Build.Reason, Step: st.Build.ReasonStep, LogEntries: []buildLogEntry{}}
	}
	writeJSON(w, http.StatusOK, out)
}
