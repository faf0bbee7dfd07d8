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
