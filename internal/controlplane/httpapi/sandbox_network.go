package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// networkUpdate is SandboxNetworkUpdateConfig.
type networkUpdate struct {
	AllowInternetAccess *bool    `json:"allow_internet_access"`
	AllowOut            []string `json:"allowOut"`
	DenyOut             []string `json:"denyOut"`
}

// updateNetwork serves PUT /sandboxes/{id}/network: egress on or off, live.
func (a *API) updateNetwork(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req networkUpdate
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if len(req.AllowOut) > 0 || len(req.DenyOut) > 0 {
		writeError(w, errs.New(errs.Unimplemented, "egress rules by address and domain (allowOut, denyOut) are not available yet"))
		return
	}
	if req.AllowInternetAccess != nil {
		if err := a.svc.SetInternet(r.Context(), team(r), id, *req.AllowInternetAccess); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
