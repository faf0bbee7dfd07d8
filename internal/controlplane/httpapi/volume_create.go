package httpapi

import (
	"net/http"
)

// createVolume serves POST /volumes ({"name"}): 201 with the volume and
// the token of its content API.
func (a *API) createVolume(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	v, token, err := a.volumes.Create(r.Context(), team(r), body.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeTokenJSON{volumeJSON{v.ID, v.Name}, token})
}
