package httpapi

import "net/http"

// deleteSecret serves DELETE /secrets/{secretID}: 204, every version gone.
func (a *API) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.DeleteSecret(r.Context(), team(r), r.PathValue("secretID")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
