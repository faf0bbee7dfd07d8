package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// resume serves POST /sandboxes/{id}/resume (deprecated in E2B's API,
// still served): 201 with the sandbox once resumed, 409 when it runs.
func (a *API) resume(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ask, err := decodeResume(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, err := a.svc.Resume(r.Context(), team(r), id, seconds(ask.timeout), ask.reboot, ask.size)
	if err != nil {
		if errs.Is(err, errs.Conflict) {
			writeError(w, errs.New(errs.Conflict, "Sandbox %s is already running", id))
			return
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSandbox(sb))
}
