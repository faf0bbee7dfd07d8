package httpapi

import "net/http"

// killSandbox serves DELETE /sandboxes/{id}: 204, or 404 when unknown.
func (a *API) killSandbox(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := a.svc.Kill(r.Context(), team(r), id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
