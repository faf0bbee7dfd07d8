package httpapi

import (
	"net/http"
)

// listVolumes serves GET /volumes: the team's volumes.
func (a *API) listVolumes(w http.ResponseWriter, r *http.Request) {
	out := []volumeJSON{}
	for _, v := range a.volumes.List(team(r)) {
		out = append(out, volumeJSON{v.ID, v.Name})
	}
	writeJSON(w, http.StatusOK, out)
}
