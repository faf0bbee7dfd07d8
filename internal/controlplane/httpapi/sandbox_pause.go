package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// pause serves POST /sandboxes/{id}/pause ({"memory": bool}, default
// true; "requireHealthyGuest": bool, default false, the Python SDK's
// strict): 204 once paused, 409 when it is paused already, 503 (to retry)
// for a strict pause while the sandbox's agent does not answer.
func (a *API) pause(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var body struct {
		Memory              *bool `json:"memory"`
		RequireHealthyGuest bool  `json:"requireHealthyGuest"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	if err := a.svc.Pause(r.Context(), team(r), id, body.Memory == nil || *body.Memory, body.RequireHealthyGuest); err != nil {
		if errs.Is(err, errs.Conflict) {
			writeError(w, errs.New(errs.Conflict, "Sandbox %s is already paused", id))
			return
		}
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
