package httpapi

import "net/http"

// updateSecret serves POST (the SDK's) and PATCH /secrets/{secretID}
// (SecretUpdate: value, metadata): the value becomes the secret's next
// version; metadata, when given, replaces the stored one.
func (a *API) updateSecret(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Value    string            `json:"value"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	s, err := a.svc.UpdateSecret(r.Context(), team(r), r.PathValue("secretID"), body.Value, body.Metadata)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toSecretJSON(s))
}
