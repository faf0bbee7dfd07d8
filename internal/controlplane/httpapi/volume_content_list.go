package httpapi

import (
	"net/http"
	"path"
	"strconv"
	"syscall"

	"github.com/covesandbox/cove/internal/errs"
)

// listVolumeDir serves GET dir?path=&depth= (default 1): the entries
// under path, depth levels down.
func (vf *VolumeFiles) listVolumeDir(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	depth := 1
	if s := r.URL.Query().Get("depth"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(w, errs.New(errs.InvalidArgument, "depth must be a positive integer"))
			return
		}
		depth = n
	}
	out := []volumeEntryJSON{}
	var walk func(rel string, left int) error
	walk = func(rel string, left int) error {
		f, err := v.root.Open(rel)
		if err != nil {
			return err
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, n := range names {
			child := path.Join(rel, n)
			e, err := entry(v.root, child)
			if err != nil {
				continue // gone meanwhile
			}
			out = append(out, e)
			if e.Type == "directory" && left > 1 {
				if err := walk(child, left-1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if e, err := entry(v.root, v.rel); err != nil || e.Type != "directory" {
		if err == nil {
			err = syscall.ENOTDIR
		}
		writeError(w, contentError(v.rel, err))
		return
	}
	if err := walk(v.rel, depth); err != nil {
		writeError(w, contentError(v.rel, err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}
