package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/controlplane/service"
)

// createdAPIKey is E2B's CreatedTeamAPIKey: the raw key, shown only here.
type createdAPIKey struct {
	teamAPIKey
	Key string `json:"key"`
}

// createAPIKey serves POST /api-keys ({"name"}): 201 with the new key.
func (a *API) createAPIKey(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	raw, k, err := service.CreateKey(r.Context(), a.store, team(r), body.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	a.log.Info("api key created", "team", k.Team, "key", k.ID(), "name", k.Name)
	writeJSON(w, http.StatusCreated, createdAPIKey{teamAPIKey: keyJSON(k), Key: raw})
}
