package httpapi

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// templateInfo is E2B's Template (GET /templates).
type templateInfo struct {
	TemplateID  string    `json:"templateID"`
	BuildID     string    `json:"buildID"`
	CPUCount    int       `json:"cpuCount"`
	MemoryMB    int       `json:"memoryMB"`
	MaxCPUCount int       `json:"maxCpuCount"`
	MaxMemoryMB int       `json:"maxMemoryMB"`
	DiskSizeMB  int       `json:"diskSizeMB"`
	Public      bool      `json:"public"`
	Aliases     []string  `json:"aliases"`
	Names       []string  `json:"names"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	BuildCount  int       `json:"buildCount"`
	SpawnCount  int64     `json:"spawnCount"`
	// LastSpawnedAt is when its last sandbox started (none: omitted).
	LastSpawnedAt *time.Time        `json:"lastSpawnedAt,omitempty"`
	EnvdVersion   string            `json:"envdVersion"`
	BuildStatus   string            `json:"buildStatus"`
	Tags          map[string]string `json:"tags,omitempty"`
	// WarmError is why the node cannot keep sandboxes of the build warm
	// (Cove's own; E2B has no such field).
	WarmError string `json:"warmError,omitempty"`
	// BuildProgress and BuildDoing, while the newest build runs on this
	// server, are how far it is (percent, estimated) and what it does
	// now (Cove's own).
	BuildProgress *int   `json:"buildProgress,omitempty"`
	BuildDoing    string `json:"buildDoing,omitempty"`
	// ServingBuildID is the build sandboxes start from, when one is
	// ready: an older one while the newest builds or after it failed
	// (Cove's own).
	ServingBuildID string `json:"servingBuildID,omitempty"`
}

// templateView is a template as E2B shows it, with its spawns (counted
// from its sandboxes' created events). A record made without a time (a
// built-in one) was created with its first build.
func (a *API) templateView(r template.Record, spawns map[string]store.Spawns) templateInfo {
	if r.CreatedAt.IsZero() && len(r.Builds) > 0 {
		r.CreatedAt = r.Builds[0].CreatedAt
	}
	v := templateInfo{TemplateID: r.ID, Public: r.Public, Aliases: r.Names, Names: r.Names, CreatedAt: r.CreatedAt,
		UpdatedAt: r.CreatedAt, BuildCount: len(r.Builds), EnvdVersion: envdwire.Version, Tags: r.Tags}
	if sp, ok := spawns[r.ID]; ok {
		v.SpawnCount, v.LastSpawnedAt = sp.Count, &sp.Last
	}
	if n := len(r.Builds); n > 0 {
		b := r.Builds[n-1]
		v.BuildID, v.CPUCount, v.MemoryMB, v.DiskSizeMB, v.BuildStatus, v.WarmError = b.ID, b.CPUCount, b.MemoryMB, b.DiskMB, b.Status, b.WarmError
		if v.CPUCount == 0 { // the node's defaults (node.DefaultLimits)
			v.CPUCount, v.MemoryMB = 2, 512
		}
		v.MaxCPUCount, v.MaxMemoryMB = cmp.Or(b.MaxCPUCount, v.CPUCount), cmp.Or(b.MaxMemoryMB, v.MemoryMB)
		if !b.FinishedAt.IsZero() {
			v.UpdatedAt = b.FinishedAt
		}
		if b.Unfinished() {
			if pct, doing, ok := a.templates.Progress(b.ID); ok {
				v.BuildProgress, v.BuildDoing = &pct, doing
			}
		}
	}
	if b := r.Serving(); b != nil {
		v.ServingBuildID = b.ID
	}
	return v
}

// listTemplatesPaged serves GET /v2/templates (E2B 2.64's Template.list
// and CLI): listTemplates' templates, newest first, in pages of limit
// (≤ 100) continued by the X-Next-Token header's value.
func (a *API) listTemplatesPaged(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := listLimit(q)
	if err != nil {
		writeError(w, err)
		return
	}
	var after *store.Cursor
	if tok := q.Get("nextToken"); tok != "" {
		c, err := decodeCursor(tok)
		if err != nil {
			writeError(w, err)
			return
		}
		after = &c
	}
	recs := a.templates.List(team(r))
	spawns := a.templateSpawns(r)
	newer := func(a, b template.Record) int { // newest first; ids break ties
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	}
	slices.SortFunc(recs, newer)
	out := []templateInfo{}
	for _, rec := range recs {
		if after != nil && newer(rec, template.Record{ID: after.ID, CreatedAt: after.StartedAt}) <= 0 {
			continue
		}
		if len(out) == limit {
			last := out[len(out)-1]
			w.Header().Set("X-Next-Token", encodeCursor(store.Cursor{StartedAt: last.CreatedAt, ID: last.TemplateID}))
			break
		}
		out = append(out, a.templateView(rec, spawns))
	}
	writeJSON(w, http.StatusOK, out)
}

// listTemplates serves GET /templates: the team's templates and public ones.
func (a *API) listTemplates(w http.ResponseWriter, r *http.Request) {
	out := []templateInfo{}
	spawns := a.templateSpawns(r)
	for _, rec := range a.templates.List(team(r)) {
		out = append(out, a.templateView(rec, spawns))
	}
	writeJSON(w, http.StatusOK, out)
}

// templateSpawns are the templates' spawns; a failed read is logged and
// shows none (a count must not fail a listing).
func (a *API) templateSpawns(r *http.Request) map[string]store.Spawns {
	spawns, err := a.store.TemplateSpawns(r.Context())
	if err != nil {
		a.log.Warn("read the templates' spawns", logx.Err(err))
	}
	return spawns
}
