package httpapi

import (
	"net/http"

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
