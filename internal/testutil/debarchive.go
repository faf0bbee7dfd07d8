package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netns"
)

// DebianArchiveDir is where scripts/debian-archive.sh (make deps) keeps
// the tests' Debian archive: Debian 12's signed index as the archive
// serves it, and the packages of the debian recipe.
func DebianArchiveDir() string {
	if d := os.Getenv("COVE_TEST_ARCHIVE"); d != "" {
		return d
	}
	return "/var/cache/cove-test-archive"
}

// DebianArchiveURL is where ServeDebianArchive serves the archive: a
// mirror for debootstrap and apt-get.
const DebianArchiveURL = "http://" + InternetAddr + ":3142/debian"

// DebianArchive is the tests' Debian archive served on the fake internet
// (FakeInternet's namespace, which a test makes after its server's
// network) at DebianArchiveURL. Its
// index is the real archive's (apt and debootstrap check its signature
// with Debian's keys); a package is served by its file name, whatever the
// pool path asked.
type DebianArchive struct {
	mu      sync.Mutex
	missing []string
}

// ServeDebianArchive serves the archive at DebianArchiveURL in ns until
// the test ends. A test that needs it fails when make deps has not
// captured it.
func ServeDebianArchive(t testing.TB, ns netns.NsHandle) *DebianArchive {
	t.Helper()
	dir := DebianArchiveDir()
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		t.Fatalf("the tests' Debian archive is missing (%v): make deps captures it (scripts/debian-archive.sh)", err)
	}
	// apt fetches the index files by their hash (the signed Release
	// lists each's): every file under dists/ answers to its own.
	byHash := map[string]string{}
	err := filepath.WalkDir(filepath.Join(dir, "dists"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		rel, _ := filepath.Rel(dir, p)
		byHash[path.Join(path.Dir(rel), "by-hash/SHA256", hex.EncodeToString(sum[:]))] = rel
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &DebianArchive{}
	ln, err := ListenIn(ns, InternetAddr+":3142")
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rel, ok := strings.CutPrefix(path.Clean(r.URL.Path), "/debian/")
		switch {
		case !ok:
		case byHash[rel] != "":
			rel = byHash[rel]
		case strings.HasPrefix(rel, "pool/") && strings.HasSuffix(rel, ".deb"):
			rel = "pool/" + path.Base(rel)
		}
		var f *os.File
		err := errors.ErrUnsupported
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			f, err = root.Open(rel)
		}
		if err != nil {
			a.mu.Lock()
			a.missing = append(a.missing, r.URL.Path)
			a.mu.Unlock()
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, rel, st.ModTime(), f)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return a
}

// Missing are the paths asked that the archive does not hold.
func (a *DebianArchive) Missing() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.missing...)
}
