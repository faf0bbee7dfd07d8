package httpapi

import (
	"net/http"
	"strconv"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/template"
)

// templateBuildStart is E2B's TemplateBuildStartV2 (unknown keys, such as
// the SDK's client-only step options, are ignored).
type templateBuildStart struct {
	FromImage    string          `json:"fromImage"`
	FromTemplate string          `json:"fromTemplate"`
	Force        bool            `json:"force"`
	Steps        []template.Step `json:"steps"`
	StartCmd     string          `json:"startCmd"`
	ReadyCmd     string          `json:"readyCmd"`
}

// startTemplateBuild serves POST /v2/templates/{templateID}/builds/{buildID}.
func (a *API) startTemplateBuild(w http.ResponseWriter, r *http.Request) {
	var req templateBuildStart
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	spec := template.Spec{FromImage: req.FromImage, FromTemplate: req.FromTemplate, Steps: req.Steps,
		StartCmd: req.StartCmd, ReadyCmd: req.ReadyCmd, Force: req.Force}
	if err := a.templates.StartBuild(team(r), r.PathValue("templateID"), r.PathValue("buildID"), spec); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

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
	st, err := a.templates.Status(team(r), r.PathValue("templateID"), r.PathValue("buildID"), offset)
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
