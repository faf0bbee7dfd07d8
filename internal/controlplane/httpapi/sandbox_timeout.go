package httpapi

import (
	"net/http"
	"time"

	"github.com/covesandbox/cove/internal/errs"
)

// setTimeout serves POST /sandboxes/{id}/timeout {"timeout": s}: the
// sandbox now ends timeout seconds from now (it may shorten its life).
func (a *API) setTimeout(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Timeout == nil {
		writeError(w, errs.New(errs.InvalidArgument, "timeout is required"))
		return
	}
	if err := a.svc.SetTimeout(r.Context(), team(r), id, time.Duration(*req.Timeout)*time.Second); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refresh serves POST /sandboxes/{id}/refreshes {"duration": s}: extend
// the sandbox's life to at least duration from now.
func (a *API) refresh(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req struct {
		Duration *int64 `json:"duration"`
	}
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	d := int64(defaultTimeout)
	if req.Duration != nil {
		d = *req.Duration
	}
	if d < 0 || d > 3600 {
		writeError(w, errs.New(errs.InvalidArgument, "duration must be between 0 and 3600 seconds"))
		return
	}
	if d > 0 {
		if _, err := a.svc.Connect(r.Context(), team(r), id, time.Duration(d)*time.Second); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
