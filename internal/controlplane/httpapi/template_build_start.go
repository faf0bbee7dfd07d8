package httpapi

import (
	"net/http"

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
	if err := a.templates.StartBuild(r.Context(), team(r), r.PathValue("templateID"), r.PathValue("buildID"), spec); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
