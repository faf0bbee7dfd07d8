package envd

import (
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

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
		if err := writeInPlace(path, nil, body, meta); err != nil {
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
	if err := writeInPlace(path, old, body, meta); err != nil {
		return uploadedFile{}, err
	}
	return uploadedFile{Path: asked, Name: filepath.Base(asked), Type: "file", Metadata: filesystem.ReadMetadata(path)}, nil
}

// writeInPlace writes body and meta to the file at path (old: what was
// there, nil for none) in place, as E2B's agent does: a new file is
// created, an existing one keeps its inode (hard links, open descriptors
// and a watch on it see the new content), its owner and its mode. Its
// steps are envd's, so a watcher sees what envd's writes show: CREATE,
// CHMOD, WRITE for a new file; CHMOD, WRITE for an existing one (its
// truncation and the writes, which the kernel merges when no one has read
// them yet); a CHMOD for each metadata key set or cleared.
//
// Nothing is written beside the file and renamed over it, as uploads once
// were: that showed as a rename (no CHMOD, a CREATE for an overwrite), left
// a temporary file in the directory while it lasted, broke hard links and
// watches on the file, and held the old and the new content on disk at
// once. As on E2B, a body that breaks off or a disk that fills up leaves
// an existing file with what was written of it; a new file is removed.
func writeInPlace(path string, old os.FileInfo, body io.Reader, meta map[string]string) error {
	f, created, err := openInPlace(path, old)
	if err != nil {
		return filesystem.PathError(path, err)
	}
	err = fillInPlace(f, path, created, body)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = filesystem.PathError(path, cerr)
	}
	if err == nil {
		err = replaceMetadata(path, meta)
	}
	if err != nil && created {
		os.Remove(path) // a failed upload leaves no new file
	}
	return err
}

// openInPlace opens path for writing: made anew (created) when old is nil,
// else the file there, which the user must be allowed to write itself
// (not only its directory).
func openInPlace(path string, old os.FileInfo) (f *os.File, created bool, err error) {
	if old == nil {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, err == nil, err
		}
		// Made meanwhile, or a dangling link: written through.
	}
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	return f, false, err
}

// fillInPlace sets f's permission bits again (envd's chown: a new file's
// are 0644 whatever the umask; an existing file's set-user and set-group
// id bits go, as a chown clears them — only its owner may, and anyone
// else's write clears them in the kernel), truncates an existing file and
// writes body to it.
func fillInPlace(f *os.File, path string, created bool, body io.Reader) error {
	st, err := f.Stat()
	if err != nil {
		return filesystem.PathError(path, err)
	}
	perm := st.Mode().Perm()
	if created {
		perm = 0o644
	}
	if err := f.Chmod(perm); err != nil && !errors.Is(err, fs.ErrPermission) {
		return filesystem.PathError(path, err)
	}
	if !created {
		if err := f.Truncate(0); err != nil {
			return filesystem.PathError(path, err)
		}
	}
	return copyBody(f, body, path)
}

// replaceMetadata gives path meta as its whole metadata: the keys of an
// earlier upload or set inside go.
func replaceMetadata(path string, meta map[string]string) error {
	for k := range filesystem.ReadMetadata(path) {
		if _, ok := meta[k]; ok {
			continue // set again below
		}
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
