package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
)

// templateBuildRequest is POST /v3/templates (and the older alias form).
type templateBuildRequest struct {
	Name     string   `json:"name"`
	Alias    string   `json:"alias"`
	Tags     []string `json:"tags"`
	CPUCount int      `json:"cpuCount"`
	MemoryMB int      `json:"memoryMB"`
	// MaxCPUCount and MaxMemoryMB make the template resizable: its
	// sandboxes may ask for up to these (E2B 2.64 and 2.66).
	MaxCPUCount int `json:"maxCpuCount"`
	MaxMemoryMB int `json:"maxMemoryMB"`
	// Isolation is Cove's: the driver the template's sandboxes run on.
	Isolation string `json:"isolation"`
}

// templateBuildCreated is the 202 answer: the template and the build
// waiting for its steps.
type templateBuildCreated struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Public     bool     `json:"public"`
	Names      []string `json:"names"`
	Tags       []string `json:"tags"`
	Aliases    []string `json:"aliases"`
}

// createTemplate serves POST /v3/templates: a new template (or a new build
// of the team's template of that name).
func (a *API) createTemplate(w http.ResponseWriter, r *http.Request) {
	var req templateBuildRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Name == "" {
		req.Name = req.Alias
	}
	if req.Name == "" {
		writeError(w, errs.New(errs.InvalidArgument, "name is required"))
		return
	}
	rec, build, err := a.templates.NewBuild(r.Context(), team(r), req.Name, req.Tags, service.BuildSize{CPUCount: req.CPUCount, MemoryMB: req.MemoryMB,
		MaxCPUCount: req.MaxCPUCount, MaxMemoryMB: req.MaxMemoryMB}, req.Isolation)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, templateBuildCreated{
		TemplateID: rec.ID, BuildID: build.ID, Public: rec.Public, Names: rec.Names,
		Tags: build.PendingTags, Aliases: rec.Names,
	})
}
