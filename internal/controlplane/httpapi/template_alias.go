package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// templateAlias serves GET /templates/aliases/{alias}: 200 for the team's
// own or a public template, 403 for another team's, 404 for none.
func (a *API) templateAlias(w http.ResponseWriter, r *http.Request) {
	rec, visible, err := a.templates.Alias(team(r), r.PathValue("sub"))
	if err != nil {
		writeError(w, err)
		return
	}
	if !visible {
		writeError(w, errs.New(errs.PermissionDenied, "template %s belongs to another team", r.PathValue("sub")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": rec.ID, "public": rec.Public})
}
