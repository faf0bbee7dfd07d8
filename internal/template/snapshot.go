package template

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/ids"
)

// LayerSum is a saved layer's entry in a manifest: its name and a digest
// of everything in it, checked before the layer is used again.
type LayerSum struct {
	Name string `json:"name"`
	// Digest is a SHA-256 over every entry's path, type, mode, owner,
	// device number, opaque marker, link target and content.
	Digest string `json:"digest"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
}

// Snapshot is where a snapshot build came from and the proof of what it
// saved: the layer the sandbox's files were copied into and, when its
// driver could copy them, its processes.
type Snapshot struct {
	SandboxID string        `json:"sandboxID"`
	CreatedAt time.Time     `json:"createdAt"`
	Layer     LayerSum      `json:"layer"`
	Image     *ProcessImage `json:"image,omitempty"`
}

// SnapshotSource is what a snapshot is made from: the sandbox, the template
// build it started from, its environment and resources.
type SnapshotSource struct {
	Team, SandboxID     string
	TemplateID, BuildID string
	// Layers are the layers the sandbox stacks (names, lowest first): its
	// template build's, and those of the fork or pause it came from.
	Layers             []string
	Env                map[string]string
	CPUCount, MemoryMB int
	DiskMB             int
	Isolation          string
	// Blobs, in a cluster, are the object store's archives of the layers
	// the snapshot stacks, the saved one among them (layer name → SHA-256),
	// as the sandbox's node pushed them.
	Blobs map[string]string
}

// StageLayer makes an empty place on the layers' file system for a layer
// to be copied into (the stage itself must be made by the copy: it does
// not exist). Hold the store (Hold) from here until what is committed is
// named by a record or a sandbox.
func (s *Store) StageLayer() (string, error) {
	stage, err := s.layers.stage()
	if err != nil {
		return "", err
	}
	return stage, os.Remove(stage)
}

// Hold keeps Collect from removing layers until release is called: a
// layer committed but not yet named by a template build or a sandbox
// would look unused.
func (s *Store) Hold() (release func()) {
	s.building.RLock()
	return s.building.RUnlock
}

// LetGo lets go of a layer a copy committed (CommitLayer, under Hold)
// once its caller had it named, or not (a snapshot refused past its
// team's quota, a fork that failed): a layer that no template build names
// is collected now, with the sandboxes' layers inUse kept, or, while a
// build or another copy holds the store, as the last of them ends.
func (s *Store) LetGo(name string, inUse func() map[string]bool) {
	s.lockStale()
	named := false
	for _, r := range s.templates {
		for _, b := range r.Builds {
			named = named || slices.Contains(b.Image.Layers, name)
		}
	}
	if !named {
		s.stale = true
	}
	s.mu.Unlock()
	s.Tidy(inUse)
}

// CommitLayer stores a copied sandbox layer (the stage StageLayer gave)
// by its content and returns its manifest entry. The files the node wrote
// into every sandbox (hostname, hosts, resolv.conf) are dropped: the next
// sandbox gets its own. The stage is consumed either way.
func (s *Store) CommitLayer(stage string, avoid ...string) (LayerSum, error) {
	if err := dropIdentityFiles(stage); err != nil {
		removeStage(stage)
		return LayerSum{}, err
	}
	sum, err := digestLayer(stage)
	if err != nil {
		removeStage(stage)
		return LayerSum{}, fmt.Errorf("digest the saved layer: %w", err)
	}
	// Named by its digest: equal content is stored once. A sandbox that
	// changed nothing still has a layer (an empty one), so that every
	// snapshot has a manifest to check. A name in avoid (the layers the
	// sandbox stacks already: overlayfs refuses a layer twice) gets a
	// suffix.
	name := "sha256-" + sum.Digest[:32]
	for i := 2; slices.Contains(avoid, name); i++ {
		name = fmt.Sprintf("sha256-%s-%d", sum.Digest[:32], i)
	}
	name, err = s.layers.commit(stage, name)
	if err != nil {
		return LayerSum{}, err
	}
	sum.Name = name
	return sum, nil
}

// VerifyLayer checks a saved layer against its manifest entry: a layer
// missing, changed or damaged on disk is refused (DataLoss) before any
// sandbox stacks it.
func (s *Store) VerifyLayer(want LayerSum) error {
	if !strings.HasPrefix(want.Name, "sha256-") || strings.ContainsAny(want.Name, "/\x00") {
		return errs.New(errs.DataLoss, "saved layer %q: not a layer name", want.Name)
	}
	got, err := digestLayer(s.layers.Path(want.Name))
	if err != nil {
		return errs.New(errs.DataLoss, "saved layer %s cannot be read: %v", want.Name, err)
	}
	if got.Digest != want.Digest || got.Files != want.Files || got.Bytes != want.Bytes {
		return errs.New(errs.DataLoss, "saved layer %s is damaged: digest %s (%d files, %d bytes), the manifest says %s (%d files, %d bytes)",
			want.Name, got.Digest[:16], got.Files, got.Bytes, want.Digest[:16], want.Files, want.Bytes)
	}
	return nil
}

// digestLayer hashes a layer's tree (see LayerSum.Digest). Nothing in it
// is followed.
func digestLayer(root string) (LayerSum, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return LayerSum{}, err
	}
	sort.Strings(paths)
	h := sha256.New()
	var sum LayerSum
	buf := make([]byte, 1)
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return LayerSum{}, err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00%o\x00%d:%d\x00%d\x00", rel, st.Mode, st.Uid, st.Gid, st.Rdev)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if n, err := unix.Lgetxattr(p, "trusted.overlay.opaque", buf); err == nil && n == 1 {
				h.Write(buf)
			}
		case unix.S_IFLNK:
			t, err := os.Readlink(p)
			if err != nil {
				return LayerSum{}, err
			}
			io.WriteString(h, t)
		case unix.S_IFREG:
			f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
			if err != nil {
				return LayerSum{}, err
			}
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return LayerSum{}, err
			}
			sum.Files++
			sum.Bytes += n
		}
		h.Write([]byte{0})
	}
	sum.Digest = hex.EncodeToString(h.Sum(nil))
	return sum, nil
}

// CreateSnapshot records a snapshot of a sandbox as a template build: the
// build the sandbox started from with the saved layer on top, the
// sandbox's environment, and the manifest. A new name makes a template
// (hidden from template lists, listed by ListSnapshots); the name of one
// of the team's templates gets a new build, which its default tag takes.
// With img (its processes), the image moves into the store. Call it while
// holding the store (Hold) since the layer was committed.
func (s *Store) CreateSnapshot(name string, src SnapshotSource, layer LayerSum, procs *ProcessImage) (_ Record, err error) {
	if name != "" {
		if err := validName(name); err != nil {
			return Record{}, err
		}
	}
	var kept *ProcessImage
	if procs != nil && procs.Dir == "" && procs.Blob != "" { // in the object store, fetched where needed
		kept = new(*procs)
		kept.Name = newID()
	} else if procs != nil {
		if kept, err = s.keepImage(procs); err != nil {
			return Record{}, err
		}
		defer func() {
			if err != nil && kept.Dir != "" {
				_ = fsutil.RemoveTree(kept.Dir)
			}
		}()
	}
	return retry(func() (Record, error) { return s.createSnapshot(name, src, layer, kept) })
}

// createSnapshot records the snapshot, with kept, the processes' image
// already in the store.
func (s *Store) createSnapshot(name string, src SnapshotSource, layer LayerSum, kept *ProcessImage) (Record, error) {
	if err := s.lock(); err != nil {
		return Record{}, err
	}
	defer s.mu.Unlock()
	from, ok := s.templates[src.TemplateID]
	var fromBuild *Build
	if ok {
		fromBuild = from.Build(src.BuildID)
	}
	if fromBuild == nil {
		return Record{}, errs.New(errs.Conflict, "sandbox %s's template build %s/%s was deleted: its snapshot cannot name what it stacks", src.SandboxID, src.TemplateID, src.BuildID)
	}
	var r *Record
	if name != "" {
		found, _, err := s.find(src.Team, name)
		switch {
		case err == nil && found.Public:
			return Record{}, errs.New(errs.InvalidArgument, "%s is a built-in template's name: choose another", name)
		case err == nil && found.Team != src.Team: // an id of another team's
			return Record{}, errs.New(errs.NotFound, "template '%s' not found", name)
		case err == nil:
			r = found
		case !errs.Is(err, errs.NotFound):
			return Record{}, err
		}
	}
	if r == nil {
		r = &Record{ID: newID(), Team: src.Team, CreatedAt: time.Now().UTC(), Tags: map[string]string{}, Snapshot: true}
		if name != "" {
			r.Names = []string{name}
		}
	}
	for _, b := range r.Builds {
		if b.Unfinished() {
			return Record{}, errs.New(errs.Conflict, "template %s has a build in progress", name)
		}
	}
	img := fromBuild.Image
	if src.Layers != nil {
		img.Layers = src.Layers
	}
	img.Layers = append(slices.Clone(img.Layers), layer.Name)
	img.Binds = slices.Clone(img.Binds)
	img.Blobs = maps.Clone(img.Blobs)
	if len(src.Blobs) > 0 {
		if img.Blobs == nil {
			img.Blobs = map[string]string{}
		}
		maps.Copy(img.Blobs, src.Blobs)
	}
	img.Env = nil
	for _, k := range slices.Sorted(maps.Keys(src.Env)) {
		img.Env = append(img.Env, k+"="+src.Env[k])
	}
	now := time.Now().UTC()
	b := &Build{ID: ids.UUID(), Status: StatusReady, CreatedAt: now, FinishedAt: now,
		CPUCount: src.CPUCount, MemoryMB: src.MemoryMB, DiskMB: src.DiskMB, Isolation: src.Isolation, Image: img,
		Snapshot: &Snapshot{SandboxID: src.SandboxID, CreatedAt: now, Layer: layer}}
	b.Snapshot.Image = kept
	r.Builds = append(r.Builds, b)
	oldDefault, hadDefault := r.Tags[DefaultTag]
	r.Tags[DefaultTag] = b.ID
	if err := s.save(r); err != nil {
		r.Builds = r.Builds[:len(r.Builds)-1]
		if hadDefault {
			r.Tags[DefaultTag] = oldDefault
		} else {
			delete(r.Tags, DefaultTag)
		}
		return Record{}, err
	}
	s.templates[r.ID] = r
	return r.clone(), nil
}

// keepImage moves a copy of processes into the store, under a new name.
func (s *Store) keepImage(img *ProcessImage) (*ProcessImage, error) {
	if err := os.MkdirAll(filepath.Join(s.dir, "images"), 0o700); err != nil {
		return nil, err
	}
	kept := *img
	kept.Name = newID()
	kept.Dir = s.imagePath(kept.Name)
	if err := os.Rename(img.Dir, kept.Dir); err != nil {
		return nil, fmt.Errorf("keep a copy of a sandbox's processes: %w", err)
	}
	return &kept, nil
}

// imagePath is where the named copy of processes is stored.
func (s *Store) imagePath(name string) string { return filepath.Join(s.dir, "images", name) }

// ListSnapshots returns a team's snapshot templates, newest first, of
// sandboxID when given, named name (a tag after ':' ignored) when given.
func (s *Store) ListSnapshots(team, sandboxID, name string) []Record {
	name, _, _ = strings.Cut(name, ":")
	s.lockStale()
	defer s.mu.Unlock()
	var out []Record
	for _, r := range s.templates {
		if r.Team != team || !r.Snapshot {
			continue
		}
		if name != "" && r.ID != name && !slices.Contains(r.Names, name) {
			continue
		}
		if sandboxID != "" && !slices.ContainsFunc(r.Builds, func(b *Build) bool {
			return b.Snapshot != nil && b.Snapshot.SandboxID == sandboxID
		}) {
			continue
		}
		out = append(out, r.clone())
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// SnapshotID is how E2B names a snapshot to create sandboxes from: its
// name (or its id) with the default tag.
func (r *Record) SnapshotID() string {
	if len(r.Names) > 0 {
		return r.Names[0] + ":" + DefaultTag
	}
	return r.ID + ":" + DefaultTag
}
