package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/controlplane/service"
)

// createSecret serves POST /secrets (NewSecret: name, value, metadata):
// 201 with the secret's metadata; the value is sealed and never shown.
func (a *API) createSecret(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name     string            `json:"name"`
		Value    string            `json:"value"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	s, err := a.svc.CreateSecret(r.Context(), team(r), service.NewSecret{Name: body.Name, Value: body.Value, Metadata: body.Metadata})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSecretJSON(s))
}
