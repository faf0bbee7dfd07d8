package httpapi

import (
	"net/http"
	"strings"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
)

// updateAPIKey serves PATCH /api-keys/{apiKeyID} ({"name"}): the key
// renamed; another team's key is not found.
func (a *API) updateAPIKey(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	name := strings.TrimSpace(body.Name)
	if name == "" || len(name) > 100 {
		writeError(w, errs.New(errs.InvalidArgument, "a key's name is 1 to 100 characters"))
		return
	}
	k, err := service.TeamKey(r.Context(), a.store, team(r), r.PathValue("apiKeyID"))
	if err == nil {
		err = a.store.RenameAPIKey(r.Context(), k.Team, k.Hash, name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	k.Name = name
	writeJSON(w, http.StatusOK, keyJSON(k))
}
