package httpapi

import (
	"io"
	"net/http"
	"strconv"

	"github.com/covesandbox/cove/internal/errs"
)

// readVolumeFile serves GET file?path=: the file's bytes.
func (vf *VolumeFiles) readVolumeFile(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	f, err := v.root.Open(v.rel)
	if err != nil {
		writeError(w, contentError(v.rel, err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		writeError(w, errs.New(errs.InvalidArgument, "path /%s is not a file", v.rel))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	if _, err := io.Copy(w, f); err != nil {
		vf.log.Debug("volume file read cut short", "path", v.rel, "err", err)
	}
}
