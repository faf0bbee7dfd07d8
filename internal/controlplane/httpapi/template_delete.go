package httpapi

import "net/http"

// deleteTemplate serves DELETE /templates/{templateID}: 204; its builds'
// logs go with it, sandboxes started from it go on, and its layers stay
// until the last one ends.
func (a *API) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	if err := a.templates.Delete(r.Context(), team(r), r.PathValue("templateID")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
