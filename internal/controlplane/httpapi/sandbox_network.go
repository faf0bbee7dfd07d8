package httpapi

import (
	"cmp"
	"net/http"

	"github.com/covesandbox/cove/internal/controlplane/service"

	"github.com/covesandbox/cove/internal/network"
)

// networkUpdate is SandboxNetworkUpdateConfig.
type networkUpdate struct {
	AllowInternetAccess *bool                `json:"allow_internet_access"`
	AllowOut            *[]string            `json:"allowOut"`
	DenyOut             *[]string            `json:"denyOut"`
	EgressProxy         *network.EgressProxy `json:"egressProxy"`
	Rules               network.Rules        `json:"rules"`
	DNSServers          []string             `json:"dnsServers"`
}

// updateNetwork serves PUT /sandboxes/{id}/network: egress on or off,
// allowOut/denyOut, rules, the upstream proxy and the resolvers, live. As E2B's SDK says, the request replaces the
// sandbox's egress configuration: an omitted field is cleared (no rules,
// egress on).
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
	internet, none := true, []string{}
	rules := service.NetworkRules{Internet: cmp.Or(req.AllowInternetAccess, &internet),
		AllowOut: cmp.Or(req.AllowOut, &none), DenyOut: cmp.Or(req.DenyOut, &none), Rules: &req.Rules,
		EgressProxy: req.EgressProxy, SetEgressProxy: true, DNSServers: &req.DNSServers}
	err = a.svc.UpdateNetwork(r.Context(), team(r), id, rules)
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
