package httpapi

import "net/http"

// getTemplate serves GET /templates/{templateID}.
func (a *API) getTemplate(w http.ResponseWriter, r *http.Request) {
	rec, err := a.templates.Get(team(r), r.PathValue("templateID"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, templateView(rec))
}
