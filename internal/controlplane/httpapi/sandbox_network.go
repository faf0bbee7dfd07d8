package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/covesandbox/cove/internal/controlplane/service"
)

// networkUpdate is SandboxNetworkUpdateConfig.
type networkUpdate struct {
	AllowInternetAccess *bool           `json:"allow_internet_access"`
	AllowOut            *[]string       `json:"allowOut"`
	DenyOut             *[]string       `json:"denyOut"`
	EgressProxy         json.RawMessage `json:"egressProxy"`
	Rules               json.RawMessage `json:"rules"`
}

// updateNetwork serves PUT /sandboxes/{id}/network: egress on or off and
// allowOut/denyOut (IPs, CIDRs), live; omitted fields stay as they are.
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
	if err := notServed(rawField{"egressProxy", req.EgressProxy}, rawField{"rules", req.Rules}); err != nil {
		writeError(w, err)
		return
	}
	err = a.svc.UpdateNetwork(r.Context(), team(r), id, service.NetworkRules{
		Internet: req.AllowInternetAccess, AllowOut: req.AllowOut, DenyOut: req.DenyOut})
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
