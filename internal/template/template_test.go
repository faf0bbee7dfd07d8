package template

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/covesandbox/cove/internal/addrpolicy"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// entry is one member of a test archive.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func archive(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)), ModTime: time.Unix(1e9, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func layerOf(t *testing.T, entries ...entry) v1.Layer {
	data := archive(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage has two layers: the second deletes a file of the first and
// replaces a directory's contents.
func testImage(t *testing.T) v1.Image {
	img, err := mutate.AppendLayers(empty.Image,
		layerOf(t, entry{name: "etc/", typ: tar.TypeDir}, entry{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\napp:x:1500:1500::/home/app:/bin/sh\n"},
			entry{name: "etc/group", body: "root:x:0:\napp:x:1500:\n"},
			entry{name: "gone.txt", body: "old"}, entry{name: "data/", typ: tar.TypeDir}, entry{name: "data/a", body: "a"}),
		layerOf(t, entry{name: ".wh.gone.txt"}, entry{name: "data/.wh..wh..opq"}, entry{name: "data/b", body: "b"},
			entry{name: "hello.txt", body: "hello from the image\n"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Env: []string{"PATH=/usr/bin:/bin", "IMG=1"}, WorkingDir: "/data", User: "app"})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func newStore(t *testing.T) *Store {
	t.Helper()
	testkit.NeedRoot(t, "needs root (owners, whiteout devices, trusted xattrs)")
	s, err := NewStore(t.TempDir(), logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// build runs a build without sandboxes (no RUN step) and returns the
// template and the log.
func build(t *testing.T, s *Store, name string, spec Spec) (Template, []LogEntry, error) {
	t.Helper()
	b := NewBuilder(s, nil, logx.Discard())
	b.AllowLocalImages = true
	b.Registries = loopbackRegistries // the tests' registries listen there
	rec, bd, err := s.NewBuild("team", name, nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	var logs []LogEntry
	err = b.Run(context.Background(), rec.ID, bd.ID, spec, func(e LogEntry) { logs = append(logs, e) })
	if err != nil {
		return Template{}, logs, err
	}
	tpl, err := s.Resolve(context.Background(), "team", name)
	if err != nil {
		t.Fatal(err)
	}
	return tpl, logs, nil
}

// merged reads path through the template's layers as overlayfs shows it.
func merged(s *Store, tpl Template, rel string) (string, bool) {
	var names []string
	for _, l := range tpl.RootFS.Layers {
		names = append(names, filepath.Base(l))
	}
	if _, ok := s.layers.lookup(names, rel); !ok {
		return "", false
	}
	data, err := s.layers.readFile(names, rel)
	return string(data), err == nil
}

func checkImage(t *testing.T, s *Store, tpl Template) {
	t.Helper()
	if got, _ := merged(s, tpl, "hello.txt"); got != "hello from the image\n" {
		t.Errorf("hello.txt = %q", got)
	}
	if _, ok := merged(s, tpl, "gone.txt"); ok {
		t.Error("a whiteout did not hide gone.txt")
	}
	if _, ok := merged(s, tpl, "data/a"); ok {
		t.Error("an opaque directory did not hide data/a")
	}
	if got, _ := merged(s, tpl, "data/b"); got != "b" {
		t.Errorf("data/b = %q", got)
	}
	if tpl.DefaultUser != "app" || tpl.DefaultWorkdir != "/data" || tpl.Env["IMG"] != "1" {
		t.Errorf("image settings: user %q workdir %q env %v", tpl.DefaultUser, tpl.DefaultWorkdir, tpl.Env)
	}
}

func TestFromOCILayout(t *testing.T) {
	s := newStore(t)
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(testImage(t), layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "v1"})); err != nil {
		t.Fatal(err)
	}
	tpl, _, err := build(t, s, "from-layout", Spec{FromImage: "oci:" + dir + ":v1"})
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, s, tpl)
	if len(tpl.RootFS.Layers) != 2 || len(tpl.RootFS.Binds) != 0 {
		t.Errorf("layers %v binds %v", tpl.RootFS.Layers, tpl.RootFS.Binds)
	}
	if _, _, err := build(t, s, "wrong-tag", Spec{FromImage: "oci:" + dir + ":v2"}); !errs.Is(err, errs.InvalidArgument) {
		t.Errorf("missing tag: %v", err)
	}
}

func TestFromDockerArchive(t *testing.T) {
	s := newStore(t)
	file := filepath.Join(t.TempDir(), "img.tar")
	tag, _ := name.NewTag("example.test/img:v1")
	if err := tarball.WriteToFile(file, tag, testImage(t)); err != nil {
		t.Fatal(err)
	}
	tpl, _, err := build(t, s, "from-archive", Spec{FromImage: "docker-archive:" + file})
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, s, tpl)
}

func TestLocalImagesNeedTheOperator(t *testing.T) {
	s := newStore(t)
	b := NewBuilder(s, nil, logx.Discard())
	rec, bd, _ := s.NewBuild("team", "local", nil, 1, 256)
	err := b.Run(context.Background(), rec.ID, bd.ID, Spec{FromImage: "oci:/nonexistent"}, func(LogEntry) {})
	if !errs.Is(err, errs.PermissionDenied) {
		t.Errorf("local image without the operator's consent: %v", err)
	}
}

func TestFromRegistry(t *testing.T) {
	s := newStore(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	ref := strings.TrimPrefix(reg.URL, "http://") + "/team/img:v1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, testImage(t)); err != nil {
		t.Fatal(err)
	}
	tpl, _, err := build(t, s, "from-registry", Spec{FromImage: ref})
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, s, tpl)
	// The same image again: its layers are stored once.
	tpl2, _, err := build(t, s, "from-registry-2", Spec{FromImage: ref})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(tpl.RootFS.Layers, ",") != strings.Join(tpl2.RootFS.Layers, ",") {
		t.Errorf("layers not shared: %v vs %v", tpl.RootFS.Layers, tpl2.RootFS.Layers)
	}
}

// upload stores a files archive as the build API's upload would, and
// returns the digest builds copy it by.
func upload(t *testing.T, s *Store, data []byte) string {
	sum := sha256.Sum256(data)
	digest, err := s.PutFiles(context.Background(), "team", hex.EncodeToString(sum[:]), bytes.NewReader(data), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if digest != hex.EncodeToString(sum[:]) {
		t.Fatalf("an archive kept as %s, want its SHA-256 %x", digest, sum)
	}
	return digest
}

func TestStepsAndCache(t *testing.T) {
	s := newStore(t)
	files := upload(t, s, archive(t,
		entry{name: "app/", typ: tar.TypeDir}, entry{name: "app/main.py", body: "print(1)\n"},
		entry{name: "app/lib/", typ: tar.TypeDir}, entry{name: "app/lib/util.py", body: "x = 1\n"},
		entry{name: "app/link", typ: tar.TypeSymlink, link: "/etc/shadow"},
		entry{name: "conf.ini", body: "[a]\n"}))
	spec := Spec{Steps: []Step{
		{Type: "ENV", Args: []string{"A", "1", "B", "two words"}},
		{Type: "WORKDIR", Args: []string{"/srv/app"}},
		{Type: "COPY", Args: []string{"app", ".", "user", ""}, FilesHash: files},
		{Type: "COPY", Args: []string{"conf.ini", "/etc/app/", "", "0600"}, FilesHash: files},
		{Type: "USER", Args: []string{"root"}},
	}}
	tpl, logs, err := build(t, s, "steps", spec)
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Env["A"] != "1" || tpl.Env["B"] != "two words" || tpl.DefaultWorkdir != "/srv/app" || tpl.DefaultUser != "root" {
		t.Errorf("settings: %+v", tpl)
	}
	if got, _ := merged(s, tpl, "srv/app/lib/util.py"); got != "x = 1\n" {
		t.Errorf("copied file: %q", got)
	}
	top := func(rel string) os.FileInfo {
		for i := len(tpl.RootFS.Layers) - 1; i >= 0; i-- {
			if st, err := os.Lstat(filepath.Join(tpl.RootFS.Layers[i], rel)); err == nil {
				return st
			}
		}
		t.Fatalf("%s not in any layer", rel)
		return nil
	}
	if st := top("srv/app/main.py"); st.Sys() == nil || fileOwner(st) != 1000 {
		t.Errorf("COPY --chown user: owner %d", fileOwner(st))
	}
	if st := top("srv/app/link"); st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("a symlink was not copied as a link: %v", st.Mode())
	}
	if st := top("etc/app/conf.ini"); st.Mode().Perm() != 0o600 {
		t.Errorf("COPY mode: %v", st.Mode())
	}
	if st := top("etc"); st.Mode().Perm() != 0o755 || fileOwner(st) != 0 {
		t.Errorf("a parent directory changed: %v owner %d", st.Mode(), fileOwner(st))
	}
	if st := top("home/user"); fileOwner(st) != 1000 {
		t.Errorf("/home/user lost its owner: %d", fileOwner(st))
	}
	for _, e := range logs {
		if strings.HasPrefix(e.Message, "CACHED") {
			t.Errorf("first build hit the cache: %v", e.Message)
		}
	}

	// Unchanged: every step comes from the cache, and fast.
	start := time.Now()
	tpl2, logs, err := build(t, s, "steps", spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuild took %v", time.Since(start))
	cached := 0
	for _, e := range logs {
		if strings.HasPrefix(e.Message, "CACHED") {
			cached++
		}
	}
	if cached != len(spec.Steps) || strings.Join(tpl.RootFS.Layers, ",") != strings.Join(tpl2.RootFS.Layers, ",") {
		t.Errorf("rebuild: %d of %d steps cached; layers %v vs %v", cached, len(spec.Steps), tpl.RootFS.Layers, tpl2.RootFS.Layers)
	}
}

func TestCopyStaysInTheContext(t *testing.T) {
	s := newStore(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600)
	files := upload(t, s, archive(t,
		entry{name: "escape", typ: tar.TypeSymlink, link: outside},
		entry{name: "up", typ: tar.TypeSymlink, link: "../../../../../../.."},
		entry{name: "ok.txt", body: "ok"}))
	for _, src := range []string{"escape/secret", "up" + outside + "/secret", "../secret", "../../" + outside + "/secret", "missing"} {
		_, _, err := build(t, s, "escape", Spec{Steps: []Step{{Type: "COPY", Args: []string{src, "/x/"}, FilesHash: files}}})
		if !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("COPY %s: %v, want a refusal", src, err)
		}
	}
	// An archive whose members climb out, or write through a symlink that
	// leads out, is refused and writes nothing outside.
	for i, data := range [][]byte{
		archive(t, entry{name: "../../../../" + filepath.Join(outside, "planted"), body: "x"}),
		archive(t, entry{name: "out", typ: tar.TypeSymlink, link: outside}, entry{name: "out/planted", body: "x"}),
	} {
		h := upload(t, s, data)
		_, _, err := build(t, s, "escape", Spec{Steps: []Step{{Type: "COPY", Args: []string{".", "/x/"}, FilesHash: h}}})
		if _, serr := os.Stat(filepath.Join(outside, "planted")); serr == nil {
			t.Fatalf("archive %d wrote outside the context", i)
		}
		_ = err // a cleaned "../" name lands inside; a symlink escape fails
	}
	if _, _, err := build(t, s, "escape", Spec{Steps: []Step{{Type: "COPY", Args: []string{"up", "/x"}, FilesHash: files}}}); err != nil {
		t.Errorf("copying a symlink itself: %v", err)
	}
}

func TestDeleteKeepsLayersInUse(t *testing.T) {
	s := newStore(t)
	files := upload(t, s, archive(t, entry{name: "f", body: "unique content"}))
	tpl, _, err := build(t, s, "doomed", Spec{Steps: []Step{{Type: "COPY", Args: []string{"f", "/f"}, FilesHash: files}}})
	if err != nil {
		t.Fatal(err)
	}
	own := tpl.RootFS.Layers[len(tpl.RootFS.Layers)-1]
	if err := s.Delete("other-team", "doomed"); !errs.Is(err, errs.NotFound) {
		t.Errorf("another team deleted it: %v", err)
	}
	if err := s.Delete("team", "doomed"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(context.Background(), "team", "doomed"); !errs.Is(err, errs.NotFound) {
		t.Errorf("resolve after delete: %v", err)
	}
	inUse := map[string]bool{}
	for _, l := range tpl.RootFS.Layers {
		inUse[l] = true
	}
	if n, err := s.Collect(inUse); err != nil || n != 0 {
		t.Errorf("collect while a sandbox uses it: %d, %v", n, err)
	}
	if _, err := os.Stat(own); err != nil {
		t.Fatalf("a layer in use went: %v", err)
	}
	if n, err := s.Collect(nil); err != nil || n != 1 {
		t.Errorf("collect after the last sandbox: %d, %v", n, err)
	}
	if _, err := os.Stat(own); err == nil {
		t.Error("the deleted template's layer stayed")
	}
	if _, err := s.Resolve(context.Background(), "", BaseName); err != nil {
		t.Errorf("base after collect: %v", err)
	}
}

func fileOwner(st os.FileInfo) int {
	return int(fsutil.Owner(st) >> 32)
}

var loopbackRegistries = addrpolicy.New(addrpolicy.Config{Flag: "--registry-allow", Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})

// TestRegistryAddresses: an image reference cannot make the node connect
// to a link-local address (cloud metadata) or, unless the operator allows
// its range, to its own loopback, local images allowed or not. The check
// stops the dial before any packet leaves.
func TestRegistryAddresses(t *testing.T) {
	s := newStore(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	b := NewBuilder(s, nil, logx.Discard())
	b.AllowLocalImages = true
	for _, ref := range []string{strings.TrimPrefix(reg.URL, "http://") + "/team/img:v1", "169.254.169.254/latest/img:v1", "localhost:1/team/img:v1"} {
		rec, bd, err := s.NewBuild("team", "guarded", nil, 1, 256)
		if err != nil {
			t.Fatal(err)
		}
		err = b.Run(context.Background(), rec.ID, bd.ID, Spec{FromImage: ref}, func(LogEntry) {})
		if !errs.Is(err, errs.PermissionDenied) || !strings.Contains(err.Error(), "--registry-allow") {
			t.Errorf("pull %s: %v, want a refusal", ref, err)
		}
	}
}

// TestPullErrorsReflectNothing: what a registry answers to a failed pull
// (its error body, its status line's text, a token service's answer)
// never reaches the build's log or error: the status code and a fixed
// reason do.
func TestPullErrorsReflectNothing(t *testing.T) {
	s := newStore(t)
	const secret = "HOST-ONLY-SECRET-42"
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v2/raw/"): // a body not in the registry API's form
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"password_hash":%q}`, secret)
		case strings.HasPrefix(r.URL.Path, "/v2/diag/"): // the API's form, with a message and detail
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":%q,"detail":%q}]}`, secret, secret)
		case r.URL.Path == "/v2/":
			inner.ServeHTTP(w, r)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprint(w, secret)
		}
	}))
	defer reg.Close()
	// A registry whose token service refuses, saying why.
	authReg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "password_hash=%s", secret)
			return
		}
		w.Header().Set("Www-Authenticate", `Bearer realm="http://`+r.Host+`/token",service="x"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer authReg.Close()
	host, authHost := strings.TrimPrefix(reg.URL, "http://"), strings.TrimPrefix(authReg.URL, "http://")
	for _, c := range []struct{ ref, want string }{
		{host + "/raw/img:v1", "the registry answered 500 Internal Server Error"},
		{host + "/diag/img:v1", "the registry answered 404 Not Found (MANIFEST_UNKNOWN)"},
		{authHost + "/img:v1", "the registry answered 403 Forbidden"},
		{host + "/other/img:v1", "the registry answered 418 I'm a teapot"},
	} {
		_, logs, err := build(t, s, "reflect", Spec{FromImage: c.ref})
		all := fmt.Sprint(err)
		for _, e := range logs {
			all += "\n" + e.Message
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(all, secret) {
			t.Errorf("pull %s: %v, want %q and nothing of the answer; log:\n%s", c.ref, err, c.want, all)
		}
	}
}

// TestFilesBoundToTeam: an upload is kept under the SHA-256 of its bytes
// and answers only for the team that uploaded it under its hash; a second
// upload of other content for a bound hash replaces nothing.
func TestFilesBoundToTeam(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	hash := strings.Repeat("ab", 32)
	mine := archive(t, entry{name: "app.py", body: "print('mine')\n"})
	theirs := archive(t, entry{name: "app.py", body: "print('theirs')\n"})
	digestOf := func(b []byte) string { sum := sha256.Sum256(b); return hex.EncodeToString(sum[:]) }

	if _, err := s.PutFiles(ctx, "b", hash, bytes.NewReader(theirs), 1<<20); err != nil {
		t.Fatal(err)
	}
	if d, err := s.FilesDigest(ctx, "a", hash); err != nil || d != "" {
		t.Fatalf("team a's hash after team b uploaded under it: %q %v, want none", d, err)
	}
	if d, err := s.PutFiles(ctx, "a", hash, bytes.NewReader(mine), 1<<20); err != nil || d != digestOf(mine) {
		t.Fatalf("team a's upload: %q %v", d, err)
	}
	for _, tc := range []struct {
		team string
		body []byte
		want error // of the upload
	}{
		{"a", theirs, errs.New(errs.Conflict, "")},
		{"b", mine, errs.New(errs.Conflict, "")},
		{"a", mine, nil},
	} {
		_, err := s.PutFiles(ctx, tc.team, hash, bytes.NewReader(tc.body), 1<<20)
		if (tc.want == nil) != (err == nil) || (err != nil && !errs.Is(err, errs.Conflict)) {
			t.Errorf("team %s uploads again: %v, want %v", tc.team, err, tc.want)
		}
	}
	for team, want := range map[string][]byte{"a": mine, "b": theirs} {
		d, err := s.FilesDigest(ctx, team, hash)
		if err != nil || d != digestOf(want) {
			t.Errorf("team %s's files: %q %v, want %s", team, d, err, digestOf(want))
		}
		if got, _ := os.ReadFile(s.filesPath(d)); !bytes.Equal(got, want) {
			t.Errorf("team %s's archive changed", team)
		}
	}
}

// TestFilesCollected: an uploaded archive no build asked for in a day
// goes; one a build checked for stays.
func TestFilesCollected(t *testing.T) {
	s := newStore(t)
	old := upload(t, s, archive(t, entry{name: "old", body: "1"}))
	used := upload(t, s, archive(t, entry{name: "used", body: "2"}))
	past := time.Now().Add(-48 * time.Hour)
	for _, h := range []string{old, used} {
		os.Chtimes(s.filesPath(h), past, past)
	}
	if ok, _ := s.HasFiles(context.Background(), used); !ok {
		t.Fatal("an uploaded archive is not found")
	}
	if _, err := s.Collect(nil); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.HasFiles(context.Background(), old); ok {
		t.Error("an archive untouched for two days stayed")
	}
	if ok, _ := s.HasFiles(context.Background(), used); !ok {
		t.Error("an archive a build just checked for went")
	}
}

// TestIDOf: a reference — id, name, name:tag — names its template's id
// from the records as read; names are a team's own, ids anyone's, an
// unknown one names none.
func TestIDOf(t *testing.T) {
	s := newStore(t)
	rec, _, err := s.NewBuild("team", "named", []string{"v1"}, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ team, ref, want string }{
		{"team", rec.ID, rec.ID}, {"team", "named", rec.ID}, {"team", "named:v1", rec.ID}, {"team", "base", "base"},
		{"team", "nope", ""}, {"team", "", ""},
		{"other", "named", ""}, {"other", rec.ID, rec.ID}, {"other", "base", "base"}, {"", "named", ""},
	} {
		if got := s.IDOf(tc.team, tc.ref); got != tc.want {
			t.Errorf("IDOf(%q, %q) = %q, want %q", tc.team, tc.ref, got, tc.want)
		}
	}
}

// TestNamesPerTeam: two teams each have a template of one name; neither
// sees, changes or squats the other's, and a built-in name is no team's.
func TestNamesPerTeam(t *testing.T) {
	s := newStore(t)
	a, _, err := s.NewBuild("a", "app", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	b, bb, err := s.NewBuild("b", "app", nil, 1, 256)
	if err != nil {
		t.Fatalf("team b's template of team a's name: %v", err)
	}
	bb.Status = StatusError
	if err := s.SetBuild(b.ID, *bb); err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID {
		t.Fatal("two teams' templates of one name share a record")
	}
	for team, want := range map[string]string{"a": a.ID, "b": b.ID} {
		if r, err := s.Get(team, "app"); err != nil || r.ID != want {
			t.Errorf("team %s's app: %v %v, want %s", team, r.ID, err, want)
		}
	}
	if _, err := s.Get("c", "app"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a third team's app: %v, want NotFound", err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want errs.Kind
	}{
		{"another team deletes it by id", s.Delete("b", a.ID), errs.NotFound},
		{"another team tags it by id", func() error { _, err := s.Tag("b", a.ID, []string{"x"}); return err }(), errs.NotFound},
		{"another team builds it by id", func() error { _, _, err := s.NewBuild("b", a.ID, nil, 1, 256); return err }(), errs.NotFound},
		{"a team takes a built-in name", func() error { _, _, err := s.NewBuild("a", BaseName, nil, 1, 256); return err }(), errs.InvalidArgument},
		{"a team deletes a built-in", s.Delete("a", BaseName), errs.InvalidArgument},
	} {
		if !errs.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if err := s.Delete("b", "app"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get("a", "app"); err != nil || r.ID != a.ID {
		t.Errorf("team a's app after team b deleted its own: %v %v", r.ID, err)
	}
}

// TestTemplatesPerTeam: a team keeps at most its cap of templates: the
// next new one is QuotaExceeded and leaves no record, a rebuild of one
// it has still runs, another team's goes on, and one deleted makes room.
func TestTemplatesPerTeam(t *testing.T) {
	s := newStore(t)
	s.maxTemplates = 3
	newBuild := func(team, name string) error {
		_, b, err := s.NewBuild(team, name, nil, 1, 256)
		if err != nil {
			return err
		}
		r, err := s.Get(team, name)
		if err != nil {
			return err
		}
		b.Status = StatusError // a build that failed at once: its record stays
		return s.SetBuild(r.ID, *b)
	}
	for i := range 3 {
		if err := newBuild("a", fmt.Sprintf("app%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := newBuild("a", "one-more"); !errs.Is(err, errs.QuotaExceeded) {
		t.Errorf("a template past the cap: %v, want QuotaExceeded", err)
	}
	if _, err := s.Get("a", "one-more"); !errs.Is(err, errs.NotFound) {
		t.Errorf("the refused template's record: %v, want none", err)
	}
	if err := newBuild("a", "app0"); err != nil {
		t.Errorf("a rebuild at the cap: %v", err)
	}
	if err := newBuild("b", "one-more"); err != nil {
		t.Errorf("another team's template: %v", err)
	}
	if err := s.Delete("a", "app1"); err != nil {
		t.Fatal(err)
	}
	if err := newBuild("a", "one-more"); err != nil {
		t.Errorf("a template once one was deleted: %v", err)
	}
}

// TestOldBuildsGo: a loop of builds of one template keeps its newest
// failures and its newest ready builds, and every build a tag names.
func TestOldBuildsGo(t *testing.T) {
	s := newStore(t)
	finish := func(status string, tags ...string) string {
		t.Helper()
		r, b, err := s.NewBuild("a", "app", tags, 1, 256)
		if err != nil {
			t.Fatal(err)
		}
		b.Status = status
		if err := s.SetBuild(r.ID, *b); err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	pinned := finish(StatusReady, "v1")
	var lastFailed, lastReady string
	for range 3 * keptFailures {
		lastFailed = finish(StatusError)
	}
	for range keptReady + 20 {
		lastReady = finish(StatusReady)
	}
	r, err := s.Get("a", "app")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, b := range r.Builds {
		count[b.Status]++
	}
	// Ready: at most keptReady no tag names, the default tag's and v1's.
	if count[StatusError] > keptFailures || count[StatusReady] > keptReady+2 || r.Build(pinned) == nil ||
		r.Build(lastFailed) == nil || r.Build(lastReady) == nil || r.Tags["v1"] != pinned {
		t.Errorf("after %d failed and %d ready builds: %v kept (want at most %d failed, %d ready); the tagged one kept %v, the newest %v %v",
			3*keptFailures, keptReady+20, count, keptFailures, keptReady+2, r.Build(pinned) != nil, r.Build(lastFailed) != nil, r.Build(lastReady) != nil)
	}
}
