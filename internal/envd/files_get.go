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
// Content-Length through http.ServeContent) or, when asked and it pays
// (compressionPays), gzip.
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
	ct := mime.TypeByExtension(filepath.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	if st.Size() == 0 && st.Mode().IsRegular() {
		// A file that tells no size (/proc, /sys: ServeContent would send
		// nothing, or fail to seek under gVisor) is sent as it reads,
		// without a length or ranges, as E2B's agent sends a gzipped one.
		h.Set("Content-Type", ct)
		h.Set("Last-Modified", st.ModTime().UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			if _, err := io.Copy(w, f); err != nil {
				s.log.Warn("download", "path", req.path, "err", err)
			}
		}
		return
	}
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) || !compressionPays(f, st.Size()) {
		http.ServeContent(w, r, name, st.ModTime(), f)
		return
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

// Downloads are gzipped, when the client accepts it, only where that pays:
// a body of gzipMin to gzipMax bytes whose first gzipProbe bytes compress
// to gzipRatio of their size or less. Below, the header costs more than it
// saves; above, and for data already compressed (images, archives, random
// bytes), compressing on both ends costs more than sending the bytes on a
// loopback or a LAN (a 50 MiB random file read through the JS SDK took
// 5.7 s gzipped, against 0.13 s to write it) — and a raw body keeps its
// Content-Length and Range.
const (
	gzipMin   = 1 << 10
	gzipMax   = 1 << 20
	gzipProbe = 64 << 10
	gzipRatio = 0.9
)

// compressionPays reports whether a file of size bytes, whose first bytes
// f holds, is worth gzipping (see gzipMin).
func compressionPays(f io.ReaderAt, size int64) bool {
	if size < gzipMin || size > gzipMax {
		return false
	}
	probe := make([]byte, min(size, gzipProbe))
	n, err := f.ReadAt(probe, 0)
	if n == 0 || err != nil && err != io.EOF {
		return false
	}
	var out countingWriter
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	_, _ = zw.Write(probe[:n])
	_ = zw.Close()
	return float64(out) <= gzipRatio*float64(n)
}

// countingWriter counts what is written to it.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
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
