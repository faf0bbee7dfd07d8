package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/controlplane/service"
)

// deleteAPIKey serves DELETE /api-keys/{apiKeyID}: 204, the key revoked;
// 404 for another team's; 409 for the team's last key.
func (a *API) deleteAPIKey(w http.ResponseWriter, r *http.Request) {
	k, err := service.RevokeKey(r.Context(), a.store, team(r), r.PathValue("apiKeyID"))
	if err != nil {
		writeError(w, err)
		return
	}
	a.log.Info("api key revoked", "team", k.Team, "key", k.ID(), "name", k.Name)
	w.WriteHeader(http.StatusNoContent)
}
