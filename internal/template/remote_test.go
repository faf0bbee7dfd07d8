package template

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/layertar"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/objstore"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.StopObjectStore()
	os.Exit(code)
}

// sharedStores are two nodes' stores sharing one real S3 bucket.
func sharedStores(t *testing.T) (a, b *Store, bucket *objstore.Bucket) {
	url, creds := testutil.ObjectStore(t)
	bucket, err := objstore.Open(context.Background(), url, creds)
	if err != nil {
		t.Fatal(err)
	}
	a, b = newStore(t), newStore(t)
	a.UseRemote(bucket)
	b.UseRemote(bucket)
	return a, b, bucket
}

// TestLayerThroughTheObjectStore pushes a layer holding every kind of
// entry a layer has from one node's store and fetches it into another's:
// the copy is the same tree (its content digest, owners, modes, whiteouts,
// opaque directories, hard links); an archive damaged or missing in the
// bucket is refused and leaves nothing behind.
func TestLayerThroughTheObjectStore(t *testing.T) {
	ctx := context.Background()
	a, b, bucket := sharedStores(t)
	stage, err := a.layers.stage()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(stage, "etc/opaque"), 0o750))
	must(unix.Setxattr(filepath.Join(stage, "etc/opaque"), "trusted.overlay.opaque", []byte("y"), 0))
	must(os.WriteFile(filepath.Join(stage, "etc/opaque/kept"), []byte("kept"), 0o640))
	must(os.Lchown(filepath.Join(stage, "etc/opaque/kept"), 1234, 5678))
	must(os.WriteFile(filepath.Join(stage, "etc/tool"), bytes.Repeat([]byte("x"), 3<<20), 0o755))
	must(os.Chmod(filepath.Join(stage, "etc/tool"), 0o4755|os.ModeSetuid))
	must(os.Link(filepath.Join(stage, "etc/tool"), filepath.Join(stage, "etc/tool-again")))
	must(os.Symlink("../etc/tool", filepath.Join(stage, "etc/link")))
	must(unix.Mknod(filepath.Join(stage, "etc/gone"), unix.S_IFCHR, 0))
	must(os.Lchown(filepath.Join(stage, "etc/gone"), 1000, 1000))
	name, err := a.layers.commitByContent(stage)
	must(err)

	digest, err := a.PushLayer(ctx, name)
	must(err)
	again, err := a.PushLayer(ctx, name)
	if err != nil || again != digest {
		t.Errorf("a second push: %s %v, want the same archive %s", again, err, digest)
	}
	must(b.pullLayer(ctx, name, digest))
	got, err := hashTree(b.layers.Path(name))
	must(err)
	if "sha256-"+got != name {
		t.Errorf("the fetched layer hashes to %s, its name is %s", got, name)
	}
	if !layertar.IsMarked(b.layers.Path(name)+"/etc/opaque", "trusted.overlay.opaque") {
		t.Error("etc/opaque lost its opaque marker")
	}
	var st1, st2 syscall.Stat_t
	must(syscall.Lstat(b.layers.Path(name)+"/etc/tool", &st1))
	must(syscall.Lstat(b.layers.Path(name)+"/etc/tool-again", &st2))
	if st1.Ino != st2.Ino || st1.Mode&unix.S_ISUID == 0 {
		t.Errorf("etc/tool: inode %d vs %d, mode %o", st1.Ino, st2.Ino, st1.Mode)
	}
	must(syscall.Lstat(b.layers.Path(name)+"/etc/gone", &st1))
	if st1.Mode&unix.S_IFMT != unix.S_IFCHR || st1.Rdev != 0 || st1.Uid != 1000 {
		t.Errorf("etc/gone is no whiteout of 1000: mode %o rdev %d uid %d", st1.Mode, st1.Rdev, st1.Uid)
	}

	// Damaged or missing in the bucket: refused, nothing left.
	c := newStore(t)
	c.UseRemote(bucket)
	must(bucket.Put(ctx, blobKey(strings.Repeat("0", 64)), strings.NewReader("not the layer"), -1))
	for _, d := range []string{strings.Repeat("0", 64), strings.Repeat("1", 64)} {
		err := c.pullLayer(ctx, name, d)
		if !errs.Is(err, errs.DataLoss) {
			t.Errorf("pull by %s…: %v, want DataLoss", d[:8], err)
		}
		if c.layers.Has(name) {
			t.Error("a refused layer was stored")
		}
	}
	if left, _ := filepath.Glob(filepath.Join(c.layers.dir, ".*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// BenchmarkLayerThroughTheObjectStore fetches a 64 MiB layer (random, so
// gzip gains nothing) that one store pushed into another, through a real
// S3 server on loopback, checked and committed: the cost a node pays for a
// layer it lacks.
//
//	go test -run - -bench LayerThrough ./internal/template
func BenchmarkLayerThroughTheObjectStore(b *testing.B) {
	testkit.NeedRoot(b, "")
	ctx := context.Background()
	url, creds := testutil.ObjectStore(b)
	bucket, err := objstore.Open(ctx, url, creds)
	if err != nil {
		b.Fatal(err)
	}
	open := func() *Store {
		s, err := NewStore(b.TempDir(), logx.Discard())
		if err != nil {
			b.Fatal(err)
		}
		s.UseRemote(bucket)
		return s
	}
	a := open()
	stage, err := a.layers.stage()
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 16<<20)
	for i := range 4 {
		rand.Read(data)
		if err := os.WriteFile(filepath.Join(stage, fmt.Sprintf("blob%d", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	name, err := a.layers.commitByContent(stage)
	if err != nil {
		b.Fatal(err)
	}
	digest, err := a.PushLayer(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(64 << 20)
	for b.Loop() {
		b.StopTimer()
		c := open() // a node without the layer
		b.StartTimer()
		if err := c.pullLayer(ctx, name, digest); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRemoteCollected: the archives no record names go from the bucket
// once old enough, uploaded files too; what a record names stays; a
// layer pushed again after its archive went is uploaded again.
func TestRemoteCollected(t *testing.T) {
	ctx := context.Background()
	a, _, bucket := sharedStores(t)
	tpl, _, err := build(t, a, "kept", Spec{Steps: []Step{{Type: "WORKDIR", Args: []string{"/srv/kept"}}}})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := a.Get("team", "kept")
	named := rec.Builds[0].Image.Blobs
	if len(named) != len(tpl.RootFS.Layers) {
		t.Fatalf("the build pushed %d of its %d layers", len(named), len(tpl.RootFS.Layers))
	}
	stray := func(content string) (string, string) {
		t.Helper()
		stage, err := a.layers.stage()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stage, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		name, err := a.layers.commitByContent(stage)
		if err != nil {
			t.Fatal(err)
		}
		blobs, err := a.PushLayers(ctx, []string{name})
		if err != nil {
			t.Fatal(err)
		}
		return name, blobs[name]
	}
	strayName, strayDigest := stray("no record names me")
	_, pausedDigest := stray("a paused sandbox's files") // kept by its paused state
	keep := map[string]bool{pausedDigest: true}
	if err := bucket.Put(ctx, filesKey(strings.Repeat("a", 64)), strings.NewReader("files"), -1); err != nil {
		t.Fatal(err)
	}
	has := func(key string) bool {
		t.Helper()
		ok, err := bucket.Has(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// Young: kept, whatever names them.
	if n, err := a.CollectRemote(ctx, time.Hour, time.Hour, keep); err != nil || n != 0 || !has(blobKey(strayDigest)) {
		t.Errorf("collected young objects: %d %v", n, err)
	}
	if n, err := a.CollectRemote(ctx, 0, 0, keep); err != nil || n != 2 {
		t.Errorf("collected %d objects (%v), want the stray layer's and the files", n, err)
	}
	if has(blobKey(strayDigest)) || has(filesKey(strings.Repeat("a", 64))) {
		t.Error("what no record names is still in the bucket")
	}
	for name, d := range named {
		if !has(blobKey(d)) {
			t.Errorf("layer %s of the template left the bucket", name)
		}
	}
	if !has(blobKey(pausedDigest)) {
		t.Error("the layer a paused state names left the bucket")
	}
	// Pushed again: there again, though this store pushed it before.
	if _, err := a.PushLayers(ctx, []string{strayName}); err != nil || !has(blobKey(strayDigest)) {
		t.Errorf("the layer pushed again is not in the bucket: %v", err)
	}
}

// TestTransfersCutShortRemoved: what a process killed mid-push or
// mid-fetch left (an archive, an image's stage) goes at the next start.
func TestTransfersCutShortRemoved(t *testing.T) {
	s := newStore(t)
	push := filepath.Join(s.layers.dir, ".push-123")
	fetch := filepath.Join(s.dir, "images", ".fetch-456")
	if err := os.WriteFile(push, []byte("half an archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(fetch, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(s.dir, logx.Discard()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{push, fetch} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
}
