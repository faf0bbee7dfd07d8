package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
)

// defaultTimeout applies when a create names none (e2b 2.51 sends none
// unless the user gave one).
const defaultTimeout = 300

// createSandbox serves POST /sandboxes and POST /v2/sandboxes. It answers
// 201 once the sandbox's agent is ready. v2 sandboxes are always secure.
func (a *API) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req newSandbox
	if err := decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	timeout := int64(defaultTimeout)
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	secure := strings.HasPrefix(r.URL.Path, "/v2/") || (req.Secure != nil && *req.Secure)
	sb, err := a.svc.Create(r.Context(), service.CreateRequest{
		Team: team(r), TemplateID: req.TemplateID, Timeout: time.Duration(timeout) * time.Second,
		Metadata: req.Metadata, EnvVars: req.EnvVars, Secure: secure,
		AllowInternetAccess: req.AllowInternetAccess, AutoPause: req.AutoPause != nil && *req.AutoPause,
		PublicTraffic: req.Network == nil || req.Network.AllowPublicTraffic == nil || *req.Network.AllowPublicTraffic,
		AllowOut:      egress(req.Network, true), DenyOut: egress(req.Network, false),
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSandbox(sb))
}

func egress(n *networkConfig, allow bool) []string {
	switch {
	case n == nil:
		return nil
	case allow:
		return n.AllowOut
	default:
		return n.DenyOut
	}
}
