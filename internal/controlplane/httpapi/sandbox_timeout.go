package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// setTimeout serves POST /sandboxes/{id}/timeout {"timeout": s}: the
// sandbox now ends timeout seconds from now (it may shorten its life). As
// on E2B, 0 or less ends it now: paused or killed as its lifecycle says,
// before the answer (the SDKs' set_timeout(0)).
func (a *API) setTimeout(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	timeout, err := decodeSeconds(w, r, "timeout", nil)
	if err == nil {
		err = a.svc.SetTimeout(r.Context(), team(r), id, seconds(timeout))
	}
	if err != nil {
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
	def := int64(defaultTimeout)
	d, err := decodeSeconds(w, r, "duration", &def)
	if err == nil && (d < 0 || d > 3600) {
		err = errs.New(errs.InvalidArgument, "duration must be between 0 and 3600 seconds")
	}
	if err == nil && d > 0 {
		err = a.svc.Extend(r.Context(), team(r), id, seconds(d))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
