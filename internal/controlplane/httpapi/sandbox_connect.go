package httpapi

import (
	"net/http"
)

// connect serves POST /sandboxes/{id}/connect and its v2 form: extend the
// sandbox's life to at least timeout from now and return it (200: it was
// running; resuming paused sandboxes comes with persistence).
func (a *API) connect(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	def := int64(defaultTimeout)
	timeout, err := decodeSeconds(w, r, "timeout", &def)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := a.svc.Connect(r.Context(), team(r), id, seconds(timeout))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSandbox(sb))
}
