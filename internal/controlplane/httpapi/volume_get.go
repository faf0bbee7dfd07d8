package httpapi

import (
	"net/http"
)

// getVolume serves GET /volumes/{volumeID} (an id or a name): the volume
// and its content token.
func (a *API) getVolume(w http.ResponseWriter, r *http.Request) {
	v, token, err := a.volumes.Get(r.Context(), team(r), r.PathValue("volumeID"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeTokenJSON{volumeJSON{v.ID, v.Name}, token})
}
