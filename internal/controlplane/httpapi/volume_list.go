package httpapi

import (
	"net/http"
)

// listVolumes serves GET /volumes: the team's volumes.
func (a *API) listVolumes(w http.ResponseWriter, r *http.Request) {
	vols, err := a.volumes.List(r.Context(), team(r))
	if err != nil {
		writeError(w, err)
		return
	}
	out := []volumeJSON{}
	for _, v := range vols {
		out = append(out, volumeJSON{v.ID, v.Name})
	}
	writeJSON(w, http.StatusOK, out)
}
