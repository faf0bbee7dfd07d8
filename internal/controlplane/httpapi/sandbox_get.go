package httpapi

import "net/http"

// getSandbox serves GET /sandboxes/{id}.
func (a *API) getSandbox(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := a.svc.Get(r.Context(), team(r), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toDetail(sb, true))
}
