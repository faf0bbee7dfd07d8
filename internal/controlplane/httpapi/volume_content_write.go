package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path"

	"github.com/covesandbox/cove/internal/errs"
)

// writeVolumeFile serves PUT file?path=&uid=&gid=&mode=&force= (the body
// is the content): written beside and renamed over, so a reader sees the
// old file or the new one; 409 when it exists (without force), 404 when
// its directory does not; 507 when the volume is full (the old file
// stays).
func (vf *VolumeFiles) writeVolumeFile(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	uid, gid, mode, err := owner(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if v.rel == "." {
		writeError(w, errs.New(errs.InvalidArgument, "a path to a file is needed"))
		return
	}
	if fi, err := v.root.Lstat(v.rel); err == nil {
		if fi.IsDir() {
			writeError(w, errs.New(errs.InvalidArgument, "path /%s is a directory", v.rel))
			return
		}
		if r.URL.Query().Get("force") != "true" {
			writeError(w, errs.New(errs.Conflict, "path /%s exists: write with force to overwrite it", v.rel))
			return
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(v.rel), "."+path.Base(v.rel)+".upload-"+hex.EncodeToString(rnd[:]))
	perm := os.FileMode(0o644)
	if mode != 0 {
		perm = mode
	}
	f, err := v.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		writeError(w, contentError(path.Dir(v.rel), err))
		return
	}
	_, err = io.Copy(f, r.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = applyOwner(v.root, tmp, uid, gid, mode)
	}
	if err == nil {
		err = v.root.Rename(tmp, v.rel)
	}
	if err != nil {
		v.root.Remove(tmp)
		writeError(w, contentError(v.rel, err))
		return
	}
	writeEntry(w, v, http.StatusCreated)
}
