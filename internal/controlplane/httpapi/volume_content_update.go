package httpapi

import (
	"net/http"
	"os"

	"github.com/covesandbox/cove/internal/errs"
)

// updateVolumePath serves PATCH path?path= ({uid?, gid?, mode?}).
func (vf *VolumeFiles) updateVolumePath(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	var body struct {
		UID  *uint32 `json:"uid"`
		GID  *uint32 `json:"gid"`
		Mode *uint32 `json:"mode"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	uid, gid := -1, -1
	if body.UID != nil {
		uid = int(*body.UID)
	}
	if body.GID != nil {
		gid = int(*body.GID)
	}
	var mode os.FileMode
	if body.Mode != nil {
		if *body.Mode > 0o7777 {
			writeError(w, errs.New(errs.InvalidArgument, "mode must be up to 0o7777"))
			return
		}
		mode = os.FileMode(*body.Mode&0o777) | unixModeBits(*body.Mode)
	}
	if _, err := v.root.Lstat(v.rel); err != nil {
		writeError(w, contentError(v.rel, err))
		return
	}
	if uid >= 0 || gid >= 0 {
		if err := v.root.Lchown(v.rel, uid, gid); err != nil {
			writeError(w, contentError(v.rel, err))
			return
		}
	}
	if mode != 0 {
		if err := v.root.Chmod(v.rel, mode); err != nil {
			writeError(w, contentError(v.rel, err))
			return
		}
	}
	vf.statVolumePath(w, r, v)
}
