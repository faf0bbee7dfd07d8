package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
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

// volumeContent registers a content route: the token checked, the
// volume's root opened, the path query cleaned.
func (a *API) volumeContent(pattern string, h func(http.ResponseWriter, *http.Request, volumeRequest)) {
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if a.volumes == nil {
			writeError(w, errs.New(errs.Unimplemented, "this server keeps no volumes"))
			return
		}
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		dir, err := a.volumes.Authorize(r.PathValue("volumeID"), token)
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
		Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid, Type: "unknown",
		Atime: time.Unix(st.Atim.Unix()).UTC(), Mtime: time.Unix(st.Mtim.Unix()).UTC(), Ctime: time.Unix(st.Ctim.Unix()).UTC(),
	}
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

// listVolumeDir serves GET dir?path=&depth= (default 1): the entries
// under path, depth levels down.
func (a *API) listVolumeDir(w http.ResponseWriter, r *http.Request, v volumeRequest) {
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

// makeVolumeDir serves POST dir?path=&uid=&gid=&mode=&force=: a directory
// (with its parents when force), 201 with its entry; 409 when it exists
// (without force).
func (a *API) makeVolumeDir(w http.ResponseWriter, r *http.Request, v volumeRequest) {
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

// statVolumePath serves GET path?path=: the entry (a link not followed).
func (a *API) statVolumePath(w http.ResponseWriter, r *http.Request, v volumeRequest) {
	writeEntry(w, v, http.StatusOK)
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

// updateVolumePath serves PATCH path?path= ({uid?, gid?, mode?}).
func (a *API) updateVolumePath(w http.ResponseWriter, r *http.Request, v volumeRequest) {
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
	a.statVolumePath(w, r, v)
}

// removeVolumePath serves DELETE path?path=: the file, link or directory
// tree; 204.
func (a *API) removeVolumePath(w http.ResponseWriter, r *http.Request, v volumeRequest) {
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

// readVolumeFile serves GET file?path=: the file's bytes.
func (a *API) readVolumeFile(w http.ResponseWriter, r *http.Request, v volumeRequest) {
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
		a.log.Debug("volume file read cut short", "path", v.rel, "err", err)
	}
}

// writeVolumeFile serves PUT file?path=&uid=&gid=&mode=&force= (the body
// is the content): written beside and renamed over, so a reader sees the
// old file or the new one; 409 when it exists (without force), 404 when
// its directory does not; 507 when the volume is full (the old file
// stays).
func (a *API) writeVolumeFile(w http.ResponseWriter, r *http.Request, v volumeRequest) {
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
