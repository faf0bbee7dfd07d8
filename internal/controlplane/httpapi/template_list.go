package httpapi

import (
	"net/http"
	"time"

	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/template"
)

// templateInfo is E2B's Template (GET /templates).
type templateInfo struct {
	TemplateID  string            `json:"templateID"`
	BuildID     string            `json:"buildID"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	Public      bool              `json:"public"`
	Aliases     []string          `json:"aliases"`
	Names       []string          `json:"names"`
	CreatedAt   time.Time         `json:"createdAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	BuildCount  int               `json:"buildCount"`
	SpawnCount  int               `json:"spawnCount"`
	EnvdVersion string            `json:"envdVersion"`
	BuildStatus string            `json:"buildStatus"`
	Tags        map[string]string `json:"tags,omitempty"`
	// WarmError is why the node cannot keep sandboxes of the build warm
	// (Cove's own; E2B has no such field).
	WarmError string `json:"warmError,omitempty"`
	// BuildProgress and BuildDoing, while the newest build runs on this
	// server, are how far it is (percent, estimated) and what it does
	// now (Cove's own).
	BuildProgress *int   `json:"buildProgress,omitempty"`
	BuildDoing    string `json:"buildDoing,omitempty"`
}

func (a *API) templateView(r template.Record) templateInfo {
	v := templateInfo{TemplateID: r.ID, Public: r.Public, Aliases: r.Names, Names: r.Names, CreatedAt: r.CreatedAt,
		UpdatedAt: r.CreatedAt, BuildCount: len(r.Builds), EnvdVersion: envd.Version, Tags: r.Tags}
	if n := len(r.Builds); n > 0 {
		b := r.Builds[n-1]
		v.BuildID, v.CPUCount, v.MemoryMB, v.DiskSizeMB, v.BuildStatus, v.WarmError = b.ID, b.CPUCount, b.MemoryMB, b.DiskMB, b.Status, b.WarmError
		if v.CPUCount == 0 { // the node's defaults (node.DefaultLimits)
			v.CPUCount, v.MemoryMB = 2, 512
		}
		if !b.FinishedAt.IsZero() {
			v.UpdatedAt = b.FinishedAt
		}
		if b.Unfinished() {
			if pct, doing, ok := a.templates.Progress(b.ID); ok {
				v.BuildProgress, v.BuildDoing = &pct, doing
			}
		}
	}
	return v
}

// listTemplates serves GET /templates: the team's templates and public ones.
func (a *API) listTemplates(w http.ResponseWriter, r *http.Request) {
	out := []templateInfo{}
	for _, rec := range a.templates.List(team(r)) {
		out = append(out, a.templateView(rec))
	}
	writeJSON(w, http.StatusOK, out)
}
