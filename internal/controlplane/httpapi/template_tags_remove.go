package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

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
