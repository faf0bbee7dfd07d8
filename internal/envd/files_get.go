package envd

import (
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/covesandbox/cove/internal/envd/filesystem"
	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/errs"
)

// download serves GET /files?path=…: the file's bytes (Range, Last-Modified,
// Content-Length through http.ServeContent) or, when asked, gzip.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	req, err := s.authorizeFiles(r, "read")
	if err != nil {
		writeError(w, err)
		return
	}
	if req.path == "" {
		writeError(w, errs.New(errs.InvalidArgument, "path is required"))
		return
	}
	var f *os.File
	err = identity.As(req.user, func() (err error) { f, err = os.Open(req.path); return err })
	if err != nil {
		writeError(w, filesystem.PathError(req.path, err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeError(w, filesystem.PathError(req.path, err))
		return
	}
	if st.IsDir() {
		writeError(w, errs.New(errs.InvalidArgument, "path '%s' is a directory", req.path))
		return
	}
	name := filepath.Base(req.path)
	h := w.Header()
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": name}))
	h.Set("Vary", "Accept-Encoding")
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		http.ServeContent(w, r, name, st.ModTime(), f)
		return
	}
	ct := mime.TypeByExtension(filepath.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Encoding", "gzip")
	h.Set("Last-Modified", st.ModTime().UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// The fastest level: downloads are mostly already compressed or random
	// data, and the default level caps a stream at ≈ 30 MB/s here.
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if _, err := io.Copy(zw, f); err != nil {
		s.log.Warn("gzip download", "path", req.path, "err", err)
	}
	_ = zw.Close()
}

// acceptsGzip reports whether an Accept-Encoding value accepts gzip with a
// non-zero quality.
func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q := 1.0
		if qv, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			q, _ = strconv.ParseFloat(qv, 64)
		}
		return q > 0
	}
	return false
}
