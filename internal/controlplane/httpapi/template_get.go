package httpapi

import (
	"cmp"
	"net/http"
	"time"

	"github.com/covesandbox/cove/internal/envd/envdwire"
)

// templateBuild is E2B's TemplateBuild: one of a template's builds.
type templateBuild struct {
	BuildID     string     `json:"buildID"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
	CPUCount    int        `json:"cpuCount"`
	MemoryMB    int        `json:"memoryMB"`
	MaxCPUCount int        `json:"maxCpuCount"`
	MaxMemoryMB int        `json:"maxMemoryMB"`
	DiskSizeMB  int        `json:"diskSizeMB,omitempty"`
	EnvdVersion string     `json:"envdVersion"`
}

// getTemplate serves GET /templates/{templateID}: the template and its
// builds, newest first (E2B's TemplateWithBuilds).
func (a *API) getTemplate(w http.ResponseWriter, r *http.Request) {
	rec, err := a.templates.Get(team(r), r.PathValue("templateID"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := struct {
		templateInfo
		Builds []templateBuild `json:"builds"`
	}{templateInfo: a.templateView(rec, a.templateSpawns(r)), Builds: []templateBuild{}}
	for i := len(rec.Builds) - 1; i >= 0; i-- {
		b := rec.Builds[i]
		tb := templateBuild{BuildID: b.ID, Status: b.Status, CreatedAt: b.CreatedAt, UpdatedAt: b.CreatedAt,
			CPUCount: b.CPUCount, MemoryMB: b.MemoryMB, MaxCPUCount: cmp.Or(b.MaxCPUCount, b.CPUCount), MaxMemoryMB: cmp.Or(b.MaxMemoryMB, b.MemoryMB),
			DiskSizeMB: b.DiskMB, EnvdVersion: envdwire.Version}
		if !b.FinishedAt.IsZero() {
			tb.FinishedAt, tb.UpdatedAt = &b.FinishedAt, b.FinishedAt
		}
		out.Builds = append(out.Builds, tb)
	}
	writeJSON(w, http.StatusOK, out)
}
