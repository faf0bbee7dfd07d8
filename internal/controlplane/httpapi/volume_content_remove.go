package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// removeVolumePath serves DELETE path?path=: the file, link or directory
// tree; 204.
func (vf *VolumeFiles) removeVolumePath(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	if v.rel == "." {
		writeError(w, errs.New(errs.InvalidArgument, "the volume's root cannot be removed: delete the volume"))
		return
	}
	if _, err := v.root.Lstat(v.rel); err != nil {
		writeError(w, contentError(v.rel, err))
		return
	}
	if err := v.root.RemoveAll(v.rel); err != nil {
		writeError(w, contentError(v.rel, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
