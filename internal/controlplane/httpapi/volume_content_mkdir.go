package httpapi

import (
	"net/http"
	"path"
)

// makeVolumeDir serves POST dir?path=&uid=&gid=&mode=&force=: a directory
// (with its parents when force), 201 with its entry; 409 when it exists
// (without force).
func (vf *VolumeFiles) makeVolumeDir(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	uid, gid, mode, err := owner(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// The directories to make: rel, and with force its missing parents,
	// each owned as asked (else as the directory it is made in).
	made := []string{v.rel}
	if r.URL.Query().Get("force") == "true" {
		for p := path.Dir(v.rel); p != "."; p = path.Dir(p) {
			if _, err := v.root.Lstat(p); err == nil {
				break
			}
			made = append(made, p)
		}
	}
	for i := len(made) - 1; i >= 0; i-- {
		err := v.root.Mkdir(made[i], 0o755)
		if err == nil {
			err = applyOwner(v.root, made[i], uid, gid, mode)
		}
		if err != nil {
			writeError(w, contentError(made[i], err))
			return
		}
	}
	writeEntry(w, v, http.StatusCreated)
}
