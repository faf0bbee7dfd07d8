package template

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/layertar"
	"github.com/covesandbox/cove/internal/objstore"
)

// Remote is the bucket a cluster's nodes share layers through (an
// objstore.Bucket): what one node built or saved, another fetches.
type Remote interface {
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	Has(ctx context.Context, key string) (bool, error)
	List(ctx context.Context, prefix string) ([]objstore.Object, error)
	Delete(ctx context.Context, key string) error
}

// blobKey is where a remote keeps the layer archive whose SHA-256 is
// digest: a key names its content, so it is written once and checked by
// every reader.
func blobKey(digest string) string { return "blobs/sha256/" + digest }

// PushLayer stores the named layer in the store's remote, as a gzipped
// tar, and returns the archive's digest, which the records keep beside
// the layer's name: a node that lacks the layer fetches it by that digest
// and checks it.
func (s *Store) PushLayer(ctx context.Context, name string) (string, error) {
	if s.remote == nil {
		return "", errs.New(errs.Unimplemented, "no object store is configured")
	}
	if !s.layers.Has(name) {
		return "", errs.New(errs.NotFound, "layer %s is not stored here", name)
	}
	return s.pushDir(ctx, s.layers.Path(name))
}

// PushImage stores a copy of processes in the store's remote, like a
// layer, and returns its archive's digest.
func (s *Store) PushImage(ctx context.Context, img *ProcessImage) (string, error) {
	if s.remote == nil {
		return "", errs.New(errs.Unimplemented, "no object store is configured")
	}
	return s.pushDir(ctx, img.Dir)
}

// pushDir packs a directory (a layer, an image) into a gzipped tar, named
// by its SHA-256 in the remote, and pushes it unless it is there.
func (s *Store) pushDir(ctx context.Context, dir string) (string, error) {
	f, err := os.CreateTemp(s.layers.dir, ".push-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha256.New()
	zw, _ := gzip.NewWriterLevel(io.MultiWriter(f, h), gzip.BestSpeed)
	if err := layertar.Pack(zw, dir, layertar.PackOptions{}); err != nil {
		return "", fmt.Errorf("pack %s: %w", filepath.Base(dir), err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("pack %s: %w", filepath.Base(dir), err)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	if ok, err := s.remote.Has(ctx, blobKey(digest)); err != nil || ok {
		return digest, err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if err := s.remote.Put(ctx, blobKey(digest), f, size); err != nil {
		return "", fmt.Errorf("push %s: %w", filepath.Base(dir), err)
	}
	return digest, nil
}

// PushLayers pushes layers (each once: the digests of those pushed
// before are remembered, and checked to be there still) and returns their
// archives' digests.
func (s *Store) PushLayers(ctx context.Context, layers []string) (map[string]string, error) {
	blobs := map[string]string{}
	for _, l := range layers {
		s.pushedMu.Lock()
		digest := s.pushed[l]
		s.pushedMu.Unlock()
		if digest != "" { // collected from the bucket since (CollectRemote)?
			if ok, err := s.remote.Has(ctx, blobKey(digest)); err != nil {
				return nil, err
			} else if !ok {
				digest = ""
			}
		}
		if digest == "" {
			var err error
			if digest, err = s.PushLayer(ctx, l); err != nil {
				return nil, err
			}
			s.pushedMu.Lock()
			s.pushed[l] = digest
			s.pushedMu.Unlock()
		}
		blobs[l] = digest
	}
	return blobs, nil
}

// CollectRemote deletes from the remote the layer and image archives no
// template record names and keep does not hold, once older than blobAge (younger ones may be a
// build's or a snapshot's on its way to its record), and uploaded build
// files and their teams' bindings older than filesAge. Every API replica may run it: deletes of one
// key twice are harmless.
func (s *Store) CollectRemote(ctx context.Context, blobAge, filesAge time.Duration, keep map[string]bool) (removed int, err error) {
	if s.remote == nil {
		return 0, nil
	}
	if err := s.lock(); err != nil {
		return 0, err
	}
	named := maps.Clone(keep)
	if named == nil {
		named = map[string]bool{}
	}
	for _, r := range s.templates {
		for _, b := range r.Builds {
			for _, d := range b.Image.Blobs {
				named[d] = true
			}
			if b.Snapshot != nil && b.Snapshot.Image != nil && b.Snapshot.Image.Blob != "" {
				named[b.Snapshot.Image.Blob] = true
			}
		}
	}
	s.mu.Unlock()
	for _, sweep := range []struct {
		prefix string
		age    time.Duration
		keep   func(key string) bool
	}{
		{blobKey(""), blobAge, func(key string) bool { return named[strings.TrimPrefix(key, blobKey(""))] }},
		{filesKey(""), filesAge, func(string) bool { return false }},
		{boundKey(""), filesAge, func(string) bool { return false }},
	} {
		objs, err := s.remote.List(ctx, sweep.prefix)
		if err != nil {
			return removed, err
		}
		for _, o := range objs {
			if sweep.keep(o.Key) || time.Since(o.Modified) < sweep.age {
				continue
			}
			if err := s.remote.Delete(ctx, o.Key); err != nil {
				return removed, err
			}
			removed++
		}
	}
	return removed, nil
}

// pullLayer fetches the layer name from the remote, where its archive is
// stored under digest, and commits it. Bytes that do not match the digest
// are refused (DataLoss) and leave nothing; a missing archive is
// DataLoss too: the records say it was pushed.
func (s *Store) pullLayer(ctx context.Context, name, digest string) error {
	if s.layers.Has(name) {
		return nil
	}
	stage, err := s.layers.stage()
	if err != nil {
		return err
	}
	if err := s.fetchBlob(ctx, digest, stage); err != nil {
		removeStage(stage)
		return fmt.Errorf("layer %s: %w", name, err)
	}
	if _, err := s.layers.commit(stage, name); err != nil {
		return err
	}
	s.pushedMu.Lock()
	s.pushed[name] = digest
	s.pushedMu.Unlock()
	return nil
}

// fetchBlob fetches the archive stored under digest and unpacks it into
// stage (an empty directory). Bytes that do not match the digest are
// refused (DataLoss), as is a missing archive: the records say it was
// pushed. The caller removes the stage on error.
func (s *Store) fetchBlob(ctx context.Context, digest, stage string) error {
	body, _, err := s.remote.Get(ctx, blobKey(digest))
	if errs.Is(err, errs.NotFound) {
		return errs.New(errs.DataLoss, "its archive %s is missing from the object store", digest)
	}
	if err != nil {
		return err
	}
	defer body.Close()
	// Unpacked before it is checked, but confined to the stage (Unpack
	// resolves every path inside it), and dropped unless it matches.
	h := sha256.New()
	tee := io.TeeReader(body, h)
	floor := &fsutil.Budget{Dir: stage, What: "a layer from the object store"} // the node's floor of free disk
	uerr := layertar.Unpack(tee, stage, layertar.UnpackOptions{Overlay: true, Exact: true, Budget: floor})
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("fetch %s: %w", digest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		return errs.New(errs.DataLoss, "damaged in the object store: its archive's SHA-256 is %s, the records say %s", got, digest)
	}
	if uerr != nil {
		return fmt.Errorf("unpack %s: %w", digest, uerr)
	}
	return nil
}

// fetchImage fetches a snapshot's copy of processes this node lacks and
// checks it against its manifest.
func (s *Store) fetchImage(ctx context.Context, img *ProcessImage) error {
	if img == nil || s.remote == nil || img.Blob == "" {
		return nil
	}
	if _, err := os.Stat(img.Dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(img.Dir), 0o700); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(filepath.Dir(img.Dir), ".fetch-")
	if err != nil {
		return err
	}
	if err := s.fetchBlob(ctx, img.Blob, stage); err != nil {
		_ = fsutil.RemoveTree(stage)
		return fmt.Errorf("copy of processes %s: %w", img.Name, err)
	}
	if err := VerifyFiles(stage, img.Files); err != nil {
		_ = fsutil.RemoveTree(stage)
		return err
	}
	if err := os.Rename(stage, img.Dir); err != nil {
		_ = fsutil.RemoveTree(stage)
		if _, serr := os.Stat(img.Dir); serr == nil { // fetched meanwhile
			return nil
		}
		return err
	}
	return nil
}
