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

// writeFile writes body to path (truncating an existing file), creating its
// parents, with u's rights (identity.As): new files and directories belong
// to u, an existing file keeps its owner, and a link planted at path is
// followed only as far as u could follow it.
func writeFile(path string, u identity.User, body io.Reader, meta map[string]string) (uploadedFile, error) {
	var out uploadedFile
	err := identity.As(u, func() (err error) {
		out, err = writeFileAs(path, u, body, meta)
		return err
	})
	return out, err
}

func writeFileAs(path string, u identity.User, body io.Reader, meta map[string]string) (uploadedFile, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return uploadedFile{}, errs.New(errs.InvalidArgument, "path '%s' is a directory", path)
	}
	if err := filesystem.MkdirAllOwned(filepath.Dir(path), u); err != nil {
		return uploadedFile{}, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return uploadedFile{}, filesystem.PathError(path, err)
	}
	if _, err := io.Copy(f, body); err != nil {
		f.Close()
		return uploadedFile{}, filesystem.PathError(path, err)
	}
	if err := f.Close(); err != nil {
		return uploadedFile{}, filesystem.PathError(path, err)
	}
	for k, v := range meta {
		if err := unix.Setxattr(path, filesystem.MetadataXattrPrefix+k, []byte(v), 0); err != nil {
			return uploadedFile{}, errs.New(errs.Internal, "store metadata %q on %s: %v", k, path, err)
		}
	}
	return uploadedFile{Path: path, Name: filepath.Base(path), Type: "file", Metadata: filesystem.ReadMetadata(path)}, nil
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
