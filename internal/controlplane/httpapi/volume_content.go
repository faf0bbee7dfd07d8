package httpapi

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/covesandbox/cove/internal/connguard"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/volume"
)

// The volume content API (/volumecontent/{volumeID}/dir|path|file), which
// E2B's SDKs reach with the volume's token (Authorization: Bearer). A
// volume holds what sandboxes wrote: every operation resolves inside its
// root (os.Root), whatever links it holds.

// volumeEntryJSON is E2B's VolumeEntryStat.
type volumeEntryJSON struct {
	Name   string    `json:"name"`
	Path   string    `json:"path"`
	Type   string    `json:"type"`
	Size   int64     `json:"size"`
	Mode   uint32    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Target string    `json:"target,omitempty"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
}

// volumeRequest is an authorized content request: the volume's root and
// the path asked for, relative to it ("." for the root).
type volumeRequest struct {
	root *os.Root
	rel  string
}

// VolumeFiles serves the content API from this host's volumes, each a
// directory found by its id. It checks no token: cove server puts it
// behind the volume token (API.volumeContent), a cluster's node behind
// its node token, and the replica that checked the volume token forwards
// to it.
type VolumeFiles struct {
	dir func(id string) (string, error)
	log *slog.Logger
	mux *http.ServeMux
}

// NewVolumeFiles serves the volumes dir finds.
func NewVolumeFiles(dir func(id string) (string, error), log *slog.Logger) *VolumeFiles {
	vf := &VolumeFiles{dir: dir, log: log, mux: http.NewServeMux()}
	vf.route("GET /volumecontent/{volumeID}/dir", vf.listVolumeDir)
	vf.route("POST /volumecontent/{volumeID}/dir", vf.makeVolumeDir)
	vf.route("GET /volumecontent/{volumeID}/path", vf.statVolumePath)
	vf.route("PATCH /volumecontent/{volumeID}/path", vf.updateVolumePath)
	vf.route("DELETE /volumecontent/{volumeID}/path", vf.removeVolumePath)
	vf.route("GET /volumecontent/{volumeID}/file", vf.readVolumeFile)
	vf.route("PUT /volumecontent/{volumeID}/file", vf.writeVolumeFile)
	return vf
}

func (vf *VolumeFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) { vf.mux.ServeHTTP(w, r) }

// Files is a VolumeServer: this host serves every volume it keeps.
func (vf *VolumeFiles) Files(context.Context, volume.Volume) (http.Handler, error) { return vf, nil }

// VolumeServer finds what serves a volume's content: this host's
// VolumeFiles, or in a cluster the node that holds it (cluster.Volumes).
type VolumeServer func(ctx context.Context, vol volume.Volume) (http.Handler, error)

// route registers a content route: the volume's root opened, the path
// query cleaned.
func (vf *VolumeFiles) route(pattern string, h func(http.ResponseWriter, *http.Request, volumeRequest)) {
	vf.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		dir, err := vf.dir(r.PathValue("volumeID"))
		if err != nil {
			writeError(w, err)
			return
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			writeError(w, err)
			return
		}
		defer root.Close()
		p := r.URL.Query().Get("path")
		rel := strings.TrimPrefix(path.Clean("/"+p), "/")
		if rel == "" {
			rel = "."
		}
		h(w, r, volumeRequest{root: root, rel: rel})
	})
}

// volumeContent serves the content API to E2B's SDKs: the volume's token
// checked, then its files (VolumeFiles here, or the node's that holds
// them in a cluster).
func (a *API) volumeContent(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	vol, err := a.volumes.Authorize(r.Context(), r.PathValue("volumeID"), token)
	if err != nil {
		writeError(w, err)
		return
	}
	connguard.Authenticated(r.Context())
	files, err := a.files(r.Context(), vol)
	if err != nil {
		writeError(w, err)
		return
	}
	files.ServeHTTP(w, r)
}

// contentError classifies a file system error of the content API.
func contentError(rel string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errs.New(errs.NotFound, "path /%s not found", rel)
	case errors.Is(err, fs.ErrExist):
		return errs.New(errs.Conflict, "path /%s exists", rel)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		return errs.New(errs.InvalidArgument, "path /%s: %v", rel, err)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return errs.New(errs.PermissionDenied, "path /%s: %v", rel, err)
	}
	return err
}

// entry describes rel (not followed).
func entry(root *os.Root, rel string) (volumeEntryJSON, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return volumeEntryJSON{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	e := volumeEntryJSON{
		Name: path.Base("/" + rel), Path: path.Clean("/" + rel), Size: fi.Size(),
		Mode: uint32(st.Mode) & 0o7777, UID: st.Uid, GID: st.Gid, Type: "unknown", // Mode is a uint16 on some systems
	}
	e.Atime, e.Mtime, e.Ctime = fileTimes(fi)
	switch {
	case fi.Mode().IsRegular():
		e.Type = "file"
	case fi.IsDir():
		e.Type = "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "symlink"
		e.Target, _ = root.Readlink(rel)
	}
	return e, nil
}

// owner reads the uid, gid and mode queries of a write (-1 / 0: not set).
func owner(r *http.Request) (uid, gid int, mode os.FileMode, err error) {
	uid, gid = -1, -1
	for name, to := range map[string]*int{"uid": &uid, "gid": &gid} {
		if s := r.URL.Query().Get(name); s != "" {
			n, perr := strconv.ParseUint(s, 10, 32)
			if perr != nil {
				return 0, 0, 0, errs.New(errs.InvalidArgument, "%s must be a number", name)
			}
			*to = int(n)
		}
	}
	if s := r.URL.Query().Get("mode"); s != "" {
		n, perr := strconv.ParseUint(s, 10, 32)
		if perr != nil || n > 0o7777 {
			return 0, 0, 0, errs.New(errs.InvalidArgument, "mode must be a number up to 0o7777")
		}
		mode = os.FileMode(n&0o777) | unixModeBits(uint32(n))
	}
	return uid, gid, mode, nil
}

func unixModeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&unix.S_ISUID != 0 {
		out |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		out |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		out |= os.ModeSticky
	}
	return out
}

// applyOwner gives rel the owner and mode asked for; an owner not asked
// for is its directory's (a volume's root is the sandboxes' user's, so
// what the API writes there is theirs too).
func applyOwner(root *os.Root, rel string, uid, gid int, mode os.FileMode) error {
	if uid < 0 || gid < 0 {
		if fi, err := root.Stat(path.Dir(rel)); err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			if uid < 0 {
				uid = int(st.Uid)
			}
			if gid < 0 {
				gid = int(st.Gid)
			}
		}
	}
	if uid >= 0 || gid >= 0 {
		if err := root.Lchown(rel, uid, gid); err != nil {
			return err
		}
	}
	if mode != 0 {
		return root.Chmod(rel, mode)
	}
	return nil
}

// writeEntry answers with the entry of the request's path.
func writeEntry(w http.ResponseWriter, v volumeRequest, status int) {
	e, err := entry(v.root, v.rel)
	if err != nil {
		writeError(w, contentError(v.rel, err))
		return
	}
	writeJSON(w, status, e)
}
