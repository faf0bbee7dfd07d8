package httpapi

import (
	"net/http"
	"sort"

	"github.com/covesandbox/cove/internal/errs"
)

// assignTemplateTags serves POST /templates/tags {target: "name:tag", tags}.
func (a *API) assignTemplateTags(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Target string   `json:"target"`
		Tags   []string `json:"tags"`
	}
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Target == "" || len(req.Tags) == 0 {
		writeError(w, errs.New(errs.InvalidArgument, "target and tags are required"))
		return
	}
	build, err := a.templates.Tag(team(r), req.Target, req.Tags)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"tags": req.Tags, "buildID": build})
}

// removeTemplateTags serves DELETE /templates/tags {name, tags}.
func (a *API) removeTemplateTags(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Name == "" || len(req.Tags) == 0 {
		writeError(w, errs.New(errs.InvalidArgument, "name and tags are required"))
		return
	}
	if err := a.templates.Untag(team(r), req.Name, req.Tags); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type templateTag struct {
	Tag       string `json:"tag"`
	BuildID   string `json:"buildID"`
	CreatedAt string `json:"createdAt"`
}

// templateTags serves GET /templates/{templateID}/tags.
func (a *API) templateTags(w http.ResponseWriter, r *http.Request) {
	rec, err := a.templates.Get(team(r), r.PathValue("templateID"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := []templateTag{}
	for tag, id := range rec.Tags {
		t := templateTag{Tag: tag, BuildID: id}
		if b := rec.Build(id); b != nil {
			t.CreatedAt = b.CreatedAt.Format("2006-01-02T15:04:05Z07:00")
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	writeJSON(w, http.StatusOK, out)
}
