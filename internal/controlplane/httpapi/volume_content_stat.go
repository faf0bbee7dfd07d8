package httpapi

import (
	"net/http"
)

// statVolumePath serves GET path?path=: the entry (a link not followed).
func (vf *VolumeFiles) statVolumePath(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	writeEntry(w, v, http.StatusOK)
}
