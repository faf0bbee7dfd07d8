package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// volumeJSON is E2B's Volume; volumeTokenJSON its VolumeAndToken.
type volumeJSON struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
}

type volumeTokenJSON struct {
	volumeJSON
	Token string `json:"token"`
}

// withVolumes answers 501 where the server keeps no volumes.
func (a *API) withVolumes(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.volumes == nil {
			writeError(w, errs.New(errs.Unimplemented, "this server keeps no volumes"))
			return
		}
		h(w, r)
	}
}

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
	v, token, err := a.volumes.Create(team(r), body.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeTokenJSON{volumeJSON{v.ID, v.Name}, token})
}

// listVolumes serves GET /volumes: the team's volumes.
func (a *API) listVolumes(w http.ResponseWriter, r *http.Request) {
	out := []volumeJSON{}
	for _, v := range a.volumes.List(team(r)) {
		out = append(out, volumeJSON{v.ID, v.Name})
	}
	writeJSON(w, http.StatusOK, out)
}

// getVolume serves GET /volumes/{volumeID} (an id or a name): the volume
// and its content token.
func (a *API) getVolume(w http.ResponseWriter, r *http.Request) {
	v, token, err := a.volumes.Get(team(r), r.PathValue("volumeID"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeTokenJSON{volumeJSON{v.ID, v.Name}, token})
}

// deleteVolume serves DELETE /volumes/{volumeID}: 204; sandboxes that
// mount it keep it until they end.
func (a *API) deleteVolume(w http.ResponseWriter, r *http.Request) {
	if err := a.volumes.Delete(team(r), r.PathValue("volumeID")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
