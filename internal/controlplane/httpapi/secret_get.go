package httpapi

import "net/http"

// getSecret serves GET /secrets/{secretID}: a secret by id or name.
func (a *API) getSecret(w http.ResponseWriter, r *http.Request) {
	s, err := a.svc.Secret(r.Context(), team(r), r.PathValue("secretID"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSecretJSON(s))
}
