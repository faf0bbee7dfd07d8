package httpapi

import (
	"net/http"
)

// deleteVolume serves DELETE /volumes/{volumeID}: 204; sandboxes that
// mount it keep it until they end.
func (a *API) deleteVolume(w http.ResponseWriter, r *http.Request) {
	if err := a.volumes.Delete(r.Context(), team(r), r.PathValue("volumeID")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
