package envd

import (
	"compress/gzip"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/envd/filesystem"
	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/errs"
)

// uploadedFile is one entry of POST /files' answer.
type uploadedFile struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// upload serves POST /files: multipart parts named "file" (each to the path
// query or the part's file name) or one raw body (octet-stream, optionally
// gzip) to the path query.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	req, err := s.authorizeFiles(r, "write")
	if err != nil {
		writeError(w, err)
		return
	}
	meta := uploadMetadata(r.Header)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []uploadedFile
	if mt == "multipart/form-data" {
		out, err = s.uploadMultipart(r, req, meta)
	} else {
		out, err = s.uploadRaw(r, req, meta)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) uploadRaw(r *http.Request, req filesRequest, meta map[string]string) ([]uploadedFile, error) {
	if req.path == "" {
		return nil, errs.New(errs.InvalidArgument, "path is required for a raw upload")
	}
	body := io.Reader(r.Body)
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		if !strings.EqualFold(enc, "gzip") {
			return nil, errs.New(errs.InvalidArgument, "unsupported content encoding %q", enc)
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, errs.New(errs.InvalidArgument, "gzip body: %v", err)
		}
		defer zr.Close()
		body = zr
	}
	f, err := writeFile(req.path, req.user, body, meta)
	if err != nil {
		return nil, err
	}
	return []uploadedFile{f}, nil
}

func (s *Server) uploadMultipart(r *http.Request, req filesRequest, meta map[string]string) ([]uploadedFile, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "multipart body: %v", err)
	}
	seen := map[string]bool{}
	var out []uploadedFile
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, errs.New(errs.InvalidArgument, "multipart body: %v", err)
		}
		if part.FormName() != "file" {
			continue
		}
		path := req.path
		if path == "" {
			// part.FileName() strips directories; the SDK sends the full destination.
			_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			if params["filename"] == "" {
				return out, errs.New(errs.InvalidArgument, "a file part has no path and no file name")
			}
			if path, err = identity.ExpandPath(req.user, params["filename"], ""); err != nil {
				return out, err
			}
		}
		if seen[path] {
			return out, errs.New(errs.InvalidArgument, "path '%s' is given twice", path)
		}
		seen[path] = true
		f, err := writeFile(path, req.user, part, meta)
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errs.New(errs.InvalidArgument, "no file part in the request")
	}
	return out, nil
}

// writeFile writes body to path (truncating an existing file), with u's
// rights (identity.As): new files and directories belong to u, an existing
// file keeps its owner, and a link planted at path is followed only as far
// as u could follow it. Missing parents are made first as E2B's agent
// makes them (filesystem.MakeParents), then with u's rights.
func writeFile(path string, u identity.User, body io.Reader, meta map[string]string) (uploadedFile, error) {
	if err := filesystem.MakeParents(filepath.Dir(path), u); err != nil {
		return uploadedFile{}, err
	}
	var out uploadedFile
	err := identity.As(u, func() (err error) {
		out, err = writeFileAs(path, u, body, meta)
		return err
	})
	return out, err
}

func writeFileAs(path string, u identity.User, body io.Reader, meta map[string]string) (uploadedFile, error) {
	// A link at path is written through, as a shell's redirection would:
	// the file replaced is the one it leads to. The answer names the path
	// asked for.
	asked := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	} else if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&os.ModeSymlink != 0 {
		// A dangling link: the file is made where it leads, if the user may.
		if err := rewriteInPlace(path, os.O_CREATE, body, meta); err != nil {
			return uploadedFile{}, err
		}
		return uploadedFile{Path: path, Name: filepath.Base(path), Type: "file", Metadata: filesystem.ReadMetadata(path)}, nil
	}
	old, err := os.Stat(path)
	switch {
	case err == nil && old.IsDir():
		return uploadedFile{}, errs.New(errs.InvalidArgument, "path '%s' is a directory", path)
	case err == nil && !old.Mode().IsRegular():
		return uploadedFile{}, errs.New(errs.InvalidArgument, "path '%s' is not a regular file", path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return uploadedFile{}, filesystem.PathError(path, err)
	case err != nil:
		old = nil
	}
	if err := filesystem.MkdirAllOwned(filepath.Dir(path), u); err != nil {
		return uploadedFile{}, err
	}
	if old != nil {
		// The user must be allowed to write the file itself, not only its
		// directory: the upload replaces its content.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return uploadedFile{}, filesystem.PathError(path, err)
		}
		f.Close()
	}
	if err := replaceFile(path, old, u, body, meta); err != nil {
		return uploadedFile{}, err
	}
	return uploadedFile{Path: asked, Name: filepath.Base(asked), Type: "file", Metadata: filesystem.ReadMetadata(path)}, nil
}

// replaceFile writes body and meta to a new file beside path and renames it
// over path, so a failed upload (no space, a broken stream) leaves path as
// it was and takes no space. The new file keeps the old one's mode and
// owner; where it could not (another user's file the user may write, or a
// directory the user may not create in) the old file is rewritten in
// place, as before.
func replaceFile(path string, old os.FileInfo, u identity.User, body io.Reader, meta map[string]string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filesystem.UploadTempPrefix+filepath.Base(path)+filesystem.UploadTempSuffix+"*")
	if err != nil {
		if old != nil && errors.Is(err, os.ErrPermission) {
			return rewriteInPlace(path, 0, body, meta)
		}
		return filesystem.PathError(path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	mode := os.FileMode(0o644)
	if old != nil {
		mode = old.Mode().Perm()
		if st, ok := old.Sys().(*syscall.Stat_t); ok && (st.Uid != u.UID || st.Gid != u.GID) {
			if u.UID != 0 {
				tmp.Close()
				os.Remove(tmp.Name())
				done = true
				return rewriteInPlace(path, 0, body, meta)
			}
			if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil {
				return filesystem.PathError(path, err)
			}
		}
	}
	if err := tmp.Chmod(mode); err != nil {
		return filesystem.PathError(path, err)
	}
	if err := copyBody(tmp, body, path); err != nil {
		return err
	}
	if err := setMetadata(tmp.Name(), meta); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return filesystem.PathError(path, err)
	}
	if err := tmp.Close(); err != nil {
		return filesystem.PathError(path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return filesystem.PathError(path, err)
	}
	done = true
	return nil
}

// rewriteInPlace truncates path (flags may add O_CREATE) and writes body
// to it: its owner and mode stay, its old metadata goes.
func rewriteInPlace(path string, flags int, body io.Reader, meta map[string]string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|flags, 0o644)
	if err != nil {
		return filesystem.PathError(path, err)
	}
	if err := copyBody(f, body, path); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return filesystem.PathError(path, err)
	}
	for k := range filesystem.ReadMetadata(path) {
		if err := unix.Removexattr(path, filesystem.MetadataXattrPrefix+k); err != nil && !errors.Is(err, unix.ENODATA) {
			return filesystem.PathError(path, err)
		}
	}
	return setMetadata(path, meta)
}

// copyBody copies an upload's body to f: a body that breaks off is the
// client's error, a write that fails the file system's.
func copyBody(f *os.File, body io.Reader, path string) error {
	r := &bodyReader{r: body}
	if _, err := io.Copy(f, r); err != nil {
		if r.err != nil {
			return errs.New(errs.InvalidArgument, "reading the upload for '%s': %v", path, r.err)
		}
		return filesystem.PathError(path, err)
	}
	return nil
}

// bodyReader remembers a read error, to tell it from a write error.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

func setMetadata(path string, meta map[string]string) error {
	for k, v := range meta {
		if err := unix.Setxattr(path, filesystem.MetadataXattrPrefix+k, []byte(v), 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) {
				return errs.New(errs.InvalidArgument, "the file system of '%s' keeps no metadata", path)
			}
			return filesystem.PathError(path, err)
		}
	}
	return nil
}

// uploadMetadata collects X-Metadata-<key> headers.
func uploadMetadata(h http.Header) map[string]string {
	var out map[string]string
	for k, vs := range h {
		key, ok := strings.CutPrefix(strings.ToLower(k), "x-metadata-")
		if !ok || key == "" || len(vs) == 0 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = vs[0]
	}
	return out
}
