package template

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

// Build states, as E2B reports them.
const (
	StatusWaiting  = "waiting"
	StatusBuilding = "building"
	StatusReady    = "ready"
	StatusError    = "error"
)

// DefaultTag is the tag a name without one means.
const DefaultTag = "default"

// MaxTeamTemplates caps the templates a team keeps (its snapshots
// aside, which its storage quota bounds).
const MaxTeamTemplates = 1000

// Image is what a sandbox of a template starts from: the layers (lowest
// first) and the defaults a build left.
type Image struct {
	Layers  []string         `json:"layers"`
	Binds   []isolation.Bind `json:"binds,omitempty"`
	User    string           `json:"user,omitempty"`
	Workdir string           `json:"workdir,omitempty"`
	Env     []string         `json:"env,omitempty"` // KEY=VALUE, in order
	// Blobs, in a cluster, are the layers' archives in the object store:
	// layer name → the archive's SHA-256.
	Blobs    map[string]string `json:"blobs,omitempty"`
	StartCmd string            `json:"startCmd,omitempty"`
	ReadyCmd string            `json:"readyCmd,omitempty"`
}

// Build is one build of a template.
type Build struct {
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	ReasonStep string    `json:"reasonStep,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	CPUCount   int       `json:"cpuCount"`
	MemoryMB   int       `json:"memoryMB"`
	// MaxCPUCount and MaxMemoryMB are how large a sandbox of the build may
	// ask to be (E2B's resizable templates; 0: its own size).
	MaxCPUCount int `json:"maxCpuCount,omitempty"`
	MaxMemoryMB int `json:"maxMemoryMB,omitempty"`
	// Isolation is the driver its sandboxes run on when they ask for none
	// ("" = the node's default).
	Isolation string `json:"isolation,omitempty"`
	DiskMB    int    `json:"diskMB,omitempty"`
	Image     Image  `json:"image"`
	// PendingTags are the tags the build takes once it is ready.
	PendingTags []string `json:"pendingTags,omitempty"`
	// WarmError is why the node's last attempt to start a warm sandbox of
	// this build failed ("" once one starts).
	WarmError string `json:"warmError,omitempty"`
	// Snapshot, on a snapshot's build, is the sandbox it saved and the
	// manifest of the layer it saved.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	// Node, in a cluster, is the node that runs or ran the build.
	Node string `json:"node,omitempty"`
	// Recipe, on a built-in recipe's build, is the RecipeVersion it was
	// made from ("" before versions were recorded).
	Recipe string `json:"recipe,omitempty"`
	// CancelRequested marks a running build its team cancelled: the
	// process that runs it (a cluster's other API replica) stops it.
	CancelRequested bool `json:"cancelRequested,omitempty"`
}

// Unfinished reports a build still waiting or running.
func (b *Build) Unfinished() bool { return b.Status == StatusWaiting || b.Status == StatusBuilding }

// Record is a template: its names, its builds (oldest first) and tags
// pointing at builds.
type Record struct {
	ID        string            `json:"id"`
	Team      string            `json:"team"`
	Names     []string          `json:"names"`
	Public    bool              `json:"public"`
	CreatedAt time.Time         `json:"createdAt"`
	Builds    []*Build          `json:"builds"`
	Tags      map[string]string `json:"tags"` // tag → build id
	// Snapshot marks a template made by snapshotting sandboxes: listed
	// with the snapshots, not with the templates.
	Snapshot bool `json:"snapshot,omitempty"`
	// Version is the stored record's version in shared Records (0: not
	// stored there yet); a save of an older one is refused.
	Version int64 `json:"-"`
}

// Build returns the build with id.
func (r *Record) Build(id string) *Build {
	for _, b := range r.Builds {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// Serving is the build the template's sandboxes start from when they ask
// for no tag (nil: none is ready).
func (r *Record) Serving() *Build { return r.tagged(DefaultTag) }

// tagged returns the ready build tag points at; "" and the default tag
// mean the newest ready build unless "default" was pointed elsewhere.
func (r *Record) tagged(tag string) *Build {
	if tag == "" || tag == "latest" {
		tag = DefaultTag
	}
	if id, ok := r.Tags[tag]; ok {
		if b := r.Build(id); b != nil && b.Status == StatusReady {
			return b
		}
		return nil
	}
	if tag != DefaultTag {
		return nil
	}
	for i := len(r.Builds) - 1; i >= 0; i-- {
		if r.Builds[i].Status == StatusReady {
			return r.Builds[i]
		}
	}
	return nil
}

// Template is a resolved template: what a driver needs to build a root and
// what the agent and node start with.
type Template struct {
	ID      string
	BuildID string
	RootFS  isolation.RootFS
	// DefaultUser and DefaultWorkdir are the agent's defaults.
	DefaultUser    string
	DefaultWorkdir string
	Env            map[string]string
	// StartCmd runs in the background when a sandbox starts; the sandbox
	// is ready once ReadyCmd exits 0.
	StartCmd, ReadyCmd string
	CPUCount, MemoryMB int
	// MaxCPUCount and MaxMemoryMB bound what a create may ask (0: the
	// template's own size).
	MaxCPUCount, MaxMemoryMB int
	// Isolation is the driver its sandboxes run on ("" = the node's default).
	Isolation string
	// Saved, for a snapshot, is the manifest of the layer it saved: checked
	// before a sandbox stacks it.
	Saved *LayerSum
	// Image, for a snapshot of a sandbox whose driver could copy its
	// processes, is that copy: its sandboxes run them on (Dir set).
	Image *ProcessImage
}

// Store holds the node's templates: records under <dir>/templates, layers
// under <dir>/layers, build caches under <dir>/cache.
type Store struct {
	dir    string
	layers Layers
	log    *slog.Logger
	// remote, when set, is where layers are shared with other nodes;
	// pushed are the digests of the layers' archives there, by name.
	remote   Remote
	pushedMu sync.Mutex
	pushed   map[string]string

	mu        sync.Mutex
	templates map[string]*Record
	// baseTarget is the id the name base resolves to ("": the host
	// template, id base; SetBase); guarded by mu.
	baseTarget string
	// builtin are the records no Records keep: the base template and the
	// recipes not built yet.
	builtin map[string]*Record
	// shared, when set, keeps the records, with other processes; gen is
	// its generation templates were read at (-1: read them again).
	shared Records
	gen    int64
	// node names this node in builds it runs (a cluster's).
	node string
	// maxTemplates is MaxTeamTemplates (a test's own, smaller).
	maxTemplates int
	// sizes are stored layers' sizes, by name, for teams' storage.
	sizesMu sync.Mutex
	sizes   map[string]int64
	// building is held (shared) by every build in progress: Collect does
	// not run while one may be committing or reusing layers.
	building sync.RWMutex
	// stale: some stored layer may be used by no template build (after a
	// delete, a build's end, a start, or while sandboxes of a deleted
	// template run); guarded by mu.
	stale bool
	// filesCollected is when uploaded archives were last collected
	// (guarded by mu).
	filesCollected time.Time
	// bindMu orders teams' bindings of uploaded files (uploads.go).
	bindMu sync.Mutex
}

// NewStore opens the store under dir, preparing the built-in base
// template. Builds a previous process left unfinished are marked failed.
func NewStore(dir string, log *slog.Logger) (*Store, error) {
	s := &Store{dir: dir, layers: Layers{dir: filepath.Join(dir, "layers")}, log: log, maxTemplates: MaxTeamTemplates,
		templates: map[string]*Record{}, stale: true, sizes: map[string]int64{}, pushed: map[string]string{}}
	// Layers keep their files' modes (setuid ones included) and uploads
	// are a team's own: only the server's user enters, but for the layers,
	// which a user-namespaced sandbox's root (another host user) must
	// reach by name to mount them; the server's data directory (0700)
	// keeps everyone else out of all of it.
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{".", 0o711}, {"layers", 0o711}, {"templates", 0o700}, {"cache", 0o700}, {"files", 0o700}, {"files/bound", 0o700}} {
		if err := os.MkdirAll(filepath.Join(dir, d.name), d.mode); err != nil {
			return nil, err
		}
		if err := os.Chmod(filepath.Join(dir, d.name), d.mode); err != nil {
			return nil, err
		}
	}
	base, err := s.ensureBase()
	if err != nil {
		return nil, err
	}
	s.builtin = map[string]*Record{BaseName: base}
	for name := range Recipes { // public, built on first use
		s.builtin[name] = &Record{ID: name, Names: []string{name}, Public: true, Tags: map[string]string{}}
	}
	maps.Copy(s.templates, s.builtin)
	entries, err := os.ReadDir(filepath.Join(dir, "templates"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "templates", e.Name()))
		if err != nil {
			return nil, err
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			log.Error("unreadable template record", "file", e.Name(), logx.Err(err))
			continue
		}
		changed := false
		for _, b := range r.Builds {
			if b.Unfinished() {
				b.Status, b.Reason, b.FinishedAt = StatusError, "the server stopped during the build", time.Now().UTC()
				changed = true
			}
		}
		s.templates[r.ID] = &r
		if changed {
			if err := s.save(&r); err != nil {
				return nil, err
			}
		}
	}
	// Stages of builds that were cut short. A step's scratch is a tmpfs
	// mounted on its build directory: detached first (a build sandbox
	// that still runs keeps its own view of it until it is killed).
	stages, _ := filepath.Glob(filepath.Join(dir, "layers", ".stage-*"))
	// And what was cut short on its way to the object store (an archive)
	// or from it (an image's stage).
	fetches, _ := filepath.Glob(filepath.Join(dir, "images", ".fetch-*"))
	stages = append(stages, fetches...)
	pushes, _ := filepath.Glob(filepath.Join(dir, "layers", ".push-*"))
	for _, p := range pushes {
		if err := os.Remove(p); err != nil {
			log.Error("remove a stale archive", "path", p, logx.Err(err))
		}
	}
	builds, _ := filepath.Glob(filepath.Join(dir, "build-*"))
	debootstraps, _ := filepath.Glob(filepath.Join(dir, "layers", ".debootstrap-*")) // a tmpfs each, too
	builds = append(builds, debootstraps...)
	for _, p := range builds {
		if err := unmount(p); err != nil {
			log.Error("unmount a stale build's scratch", "path", p, logx.Err(err))
		}
	}
	for _, p := range append(stages, builds...) {
		if err := fsutil.RemoveTree(p); err != nil {
			log.Error("remove stale build directory", "path", p, logx.Err(err))
		}
	}
	return s, nil
}

// UseRemote shares the store's layers through r (a cluster's object
// store): PushLayer stores one there, a build resolved here fetches what
// this node lacks. Call it before the store is used.
func (s *Store) UseRemote(r Remote) { s.remote = r }

// Layers is the store's layer directory.
func (s *Store) Layers() Layers { return s.layers }

// Resolve finds a ready template build by id, a name of team's, or either
// with :tag (see find). Layers this node lacks are fetched from the remote.
func (s *Store) Resolve(ctx context.Context, team, ref string) (Template, error) {
	if err := s.lock(); err != nil {
		return Template{}, err
	}
	return s.fetched(ctx, func() (*Record, *Build, error) {
		r, tag, err := s.find(team, ref)
		if err != nil {
			return nil, nil, err
		}
		b := r.tagged(tag)
		switch {
		case b == nil && tag == "":
			return nil, nil, errs.New(errs.NotFound, "template %s has no ready build", ref)
		case b == nil:
			return nil, nil, errs.New(errs.NotFound, "template %s has no ready build tagged %q", ref, tag)
		}
		return r, b, nil
	})
}

// ResolveID finds the ready build a template's default tag points at, by
// the template's id alone: never by a name, so base is the host template
// whoever holds the name base (a node's warm pool keeps templates by id).
func (s *Store) ResolveID(ctx context.Context, id string) (Template, error) {
	if err := s.lock(); err != nil {
		return Template{}, err
	}
	return s.fetched(ctx, func() (*Record, *Build, error) {
		r, ok := s.templates[id]
		if !ok {
			return nil, nil, errs.New(errs.NotFound, "template '%s' not found", id)
		}
		b := r.Serving()
		if b == nil {
			return nil, nil, errs.New(errs.NotFound, "template %s has no ready build", id)
		}
		return r, b, nil
	})
}

// ResolveBuild finds a ready build of a template by their ids (a fork
// starts from its parent's build, whatever the tags say now).
func (s *Store) ResolveBuild(ctx context.Context, templateID, buildID string) (Template, error) {
	if err := s.lock(); err != nil {
		return Template{}, err
	}
	return s.fetched(ctx, func() (*Record, *Build, error) {
		r, ok := s.templates[templateID]
		if !ok {
			return nil, nil, errs.New(errs.NotFound, "template '%s' not found", templateID)
		}
		b := r.Build(buildID)
		if b == nil || b.Status != StatusReady {
			return nil, nil, errs.New(errs.NotFound, "template %s has no ready build %s", templateID, buildID)
		}
		return r, b, nil
	})
}

// fetched resolves the build find finds, under s.mu (held by the caller;
// released here), then fetches from the remote what this node lacks of it.
func (s *Store) fetched(ctx context.Context, find func() (*Record, *Build, error)) (Template, error) {
	r, b, err := find()
	if err != nil {
		s.mu.Unlock()
		return Template{}, err
	}
	t, blobs, layers := s.resolved(r, b), maps.Clone(b.Image.Blobs), slices.Clone(b.Image.Layers)
	s.mu.Unlock()
	if err := s.fetch(ctx, layers, blobs); err != nil {
		return t, err
	}
	return t, s.fetchImage(ctx, t.Image)
}

// LayerPath is where the named layer is stored.
func (s *Store) LayerPath(name string) string { return s.layers.Path(name) }

func (s *Store) resolved(r *Record, b *Build) Template {
	t := Template{
		ID: r.ID, BuildID: b.ID, DefaultUser: b.Image.User, DefaultWorkdir: b.Image.Workdir,
		StartCmd: b.Image.StartCmd, ReadyCmd: b.Image.ReadyCmd, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		MaxCPUCount: b.MaxCPUCount, MaxMemoryMB: b.MaxMemoryMB, Isolation: b.Isolation,
		RootFS: isolation.RootFS{Binds: slices.Clone(b.Image.Binds)},
	}
	if b.Snapshot != nil {
		saved := b.Snapshot.Layer
		t.Saved = &saved
		if img := b.Snapshot.Image; img != nil {
			c := *img
			c.Dir = s.imagePath(img.Name)
			t.Image = &c
		}
	}
	for _, l := range b.Image.Layers {
		t.RootFS.Layers = append(t.RootFS.Layers, s.layers.Path(l))
	}
	if len(b.Image.Env) > 0 {
		t.Env = map[string]string{}
		for _, kv := range b.Image.Env {
			k, v, _ := strings.Cut(kv, "=")
			t.Env[k] = v
		}
	}
	return t
}

// find resolves a reference of team's to a record and the tag it carries.
// Names are a team's own: team's template of that name, else a built-in
// one (public); another team's name is not found. Ids name one template
// whoever asks: a caller that serves a team checks the record's team.
//
// The name base comes first: it names the record SetBase gave it (while
// that has one), though the host template's id is base too. Only a
// reference resolves it so; what was recorded by id (a sandbox's template
// and build, ResolveBuild) stays the host template's.
func (s *Store) find(team, ref string) (*Record, string, error) {
	name, tag, _ := strings.Cut(ref, ":")
	if name == "" {
		return nil, "", errs.New(errs.InvalidArgument, "empty template reference")
	}
	if name == BaseName && s.baseTarget != "" {
		if r, ok := s.templates[s.baseTarget]; ok {
			return r, tag, nil
		}
	}
	byID, hasID := s.templates[name]
	if hasID && (byID.Team == team || byID.Public) {
		return byID, tag, nil
	}
	var public *Record
	for _, r := range s.templates {
		if !slices.Contains(r.Names, name) {
			continue
		}
		if r.Public {
			public = r
		} else if r.Team == team {
			return r, tag, nil
		}
	}
	switch {
	case public != nil:
		return public, tag, nil
	case hasID:
		return byID, tag, nil
	}
	return nil, "", errs.New(errs.NotFound, "template '%s' not found", ref)
}

// Get returns a copy of a template's record by id, or by a name of team's
// (see find).
func (s *Store) Get(team, ref string) (Record, error) {
	if err := s.lock(); err != nil {
		return Record{}, err
	}
	defer s.mu.Unlock()
	r, _, err := s.find(team, ref)
	if err != nil {
		return Record{}, err
	}
	return s.present(r), nil
}

// SetBase gives the name base to the built-in recipe id (its records must
// have a ready build), or back to the host template ("" or BaseName),
// which keeps the name host either way.
func (s *Store) SetBase(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == BaseName {
		id = ""
	}
	if id != "" {
		r, ok := s.templates[id]
		if !ok || !r.Public || r.Serving() == nil {
			return errs.New(errs.Conflict, "template %s cannot be base: it is no built-in template with a ready build", id)
		}
	}
	s.baseTarget = id
	return nil
}

// Base is the id of the template the name base resolves to.
func (s *Store) Base() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cmp.Or(s.baseTarget, BaseName)
}

// present is a copy of r with the names it answers to now: base moves
// from the host template to the record SetBase gave it (under s.mu).
func (s *Store) present(r *Record) Record {
	c := r.clone()
	switch {
	case s.baseTarget == "":
	case r.ID == BaseName:
		c.Names = slices.DeleteFunc(c.Names, func(n string) bool { return n == BaseName })
	case r.ID == s.baseTarget:
		c.Names = append([]string{BaseName}, c.Names...)
	}
	return c
}

// IDOf names the template a reference of team's (name, name:tag or id)
// is of, from the records as last read, without reading the shared ones
// again: a cluster's placement asks on every create, just after the
// create's own check read them ("" when it names none).
func (s *Store) IDOf(team, ref string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, _, err := s.find(team, ref)
	if err != nil {
		return ""
	}
	return r.ID
}

// List returns every template team may see (its own and public ones).
func (s *Store) List(team string) []Record {
	s.lockStale()
	defer s.mu.Unlock()
	var out []Record
	for _, r := range s.templates {
		if (r.Team == team || r.Public) && !r.Snapshot {
			out = append(out, s.present(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// NewBuild starts a build of the template called name for team: the
// template is made when the name is new. Tags (default: "default") will
// point at the build once it is ready.
func (s *Store) NewBuild(team, name string, tags []string, cpu, memoryMB int) (Record, *Build, error) {
	if err := validName(name); err != nil {
		return Record{}, nil, err
	}
	var b *Build
	r, err := retry(func() (r Record, err error) {
		r, b, _, err = s.newBuild(team, name, tags, cpu, memoryMB, false)
		return r, err
	})
	return r, b, err
}

// NewRecipeBuild starts a build of the built-in template name, unless its
// newest build is unfinished (a cluster's other replica started it at the
// same time): then it returns that one, and started false.
func (s *Store) NewRecipeBuild(name string, cpu, memoryMB int) (b *Build, started bool, err error) {
	var joined bool
	_, err = retry(func() (r Record, err error) {
		r, b, joined, err = s.newBuild("", name, nil, cpu, memoryMB, true)
		return r, err
	})
	return b, err == nil && !joined, err
}

// newBuild adds a build to the template called name; join returns its
// newest build instead (joined) where that is unfinished.
func (s *Store) newBuild(team, name string, tags []string, cpu, memoryMB int, join bool) (_ Record, _ *Build, joined bool, _ error) {
	if err := s.lock(); err != nil {
		return Record{}, nil, false, err
	}
	defer s.mu.Unlock()
	r, _, err := s.find(team, name)
	if join && err == nil && len(r.Builds) > 0 && r.Builds[len(r.Builds)-1].Unfinished() {
		out := *r.Builds[len(r.Builds)-1]
		return r.clone(), &out, true, nil
	}
	switch {
	case err == nil && r.Public && team != "":
		return Record{}, nil, false, errs.New(errs.InvalidArgument, "%s is a built-in template's name: choose another", name)
	case err == nil && r.Team != team: // an id of another team's
		return Record{}, nil, false, errs.New(errs.NotFound, "template '%s' not found", name)
	case err == nil && r.ID == BaseName:
		return Record{}, nil, false, errs.New(errs.InvalidArgument, "the built-in template %s cannot be rebuilt", name)
	case errs.Is(err, errs.NotFound):
		if n := s.teamTemplates(team); team != "" && n >= s.maxTemplates {
			return Record{}, nil, false, errs.New(errs.QuotaExceeded, "team quota: the team has %d templates, at most %d: delete one first", n, s.maxTemplates)
		}
		r = &Record{ID: newID(), Team: team, Names: []string{name}, CreatedAt: time.Now().UTC(), Tags: map[string]string{}}
	case err != nil:
		return Record{}, nil, false, err
	}
	if len(tags) == 0 {
		tags = []string{DefaultTag}
	}
	for _, t := range tags {
		if err := validTag(t); err != nil {
			return Record{}, nil, false, err
		}
	}
	b := &Build{ID: ids.UUID(), Status: StatusWaiting, CreatedAt: time.Now().UTC(), CPUCount: cpu, MemoryMB: memoryMB, PendingTags: tags}
	before := r.Builds
	kept, dropped := withoutOldBuilds(r)
	r.Builds = append(kept, b)
	if err := s.save(r); err != nil {
		r.Builds = before
		return Record{}, nil, false, err
	}
	if dropped {
		s.stale = true // the builds that went may have held the only use of a layer
	}
	s.templates[r.ID] = r
	out := *b // the caller's copy: the record's own changes under s.mu
	return r.clone(), &out, false, nil
}

// A template keeps its newest keptFailures failed builds and its newest
// keptReady ready ones besides those its tags name: a loop of builds of
// one template does not grow its record. A sandbox started from a build
// that went runs on, as after its template's deletion.
const (
	keptFailures = 10
	keptReady    = 100
)

// withoutOldBuilds is r's builds (a new slice) less the failures but
// the newest keptFailures-1 and the ready builds no tag names but the
// newest keptReady-1, making room for one more; dropped says whether
// any went.
func withoutOldBuilds(r *Record) (out []*Build, dropped bool) {
	tagged := map[string]bool{}
	for _, id := range r.Tags {
		tagged[id] = true
	}
	failed, ready := 0, 0
	for _, b := range r.Builds {
		switch {
		case b.Status == StatusError:
			failed++
		case b.Status == StatusReady && !tagged[b.ID]:
			ready++
		}
	}
	out = make([]*Build, 0, len(r.Builds)+1)
	for _, b := range r.Builds {
		switch {
		case b.Status == StatusError && failed >= keptFailures:
			failed--
			continue
		case b.Status == StatusReady && !tagged[b.ID] && ready >= keptReady:
			ready--
			continue
		}
		out = append(out, b)
	}
	return out, len(out) < len(r.Builds)
}

// teamTemplates counts team's templates, its snapshots aside (s.mu held).
func (s *Store) teamTemplates(team string) int {
	n := 0
	for _, r := range s.templates {
		if r.Team == team && !r.Snapshot {
			n++
		}
	}
	return n
}

// SetBuild records a build's progress; a ready build takes its tags.
func (s *Store) SetBuild(templateID string, b Build) error {
	_, err := retry(func() (struct{}, error) { return struct{}{}, s.setBuild(templateID, b) })
	return err
}

func (s *Store) setBuild(templateID string, b Build) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, ok := s.templates[templateID]
	if !ok {
		return errs.New(errs.NotFound, "template '%s' not found", templateID)
	}
	cur := r.Build(b.ID)
	if cur == nil {
		return errs.New(errs.NotFound, "build %s not found", b.ID)
	}
	if b.Status == StatusReady {
		for _, t := range cur.PendingTags {
			r.Tags[t] = b.ID
		}
		b.PendingTags = nil
	}
	if b.Status == StatusReady || b.Status == StatusError {
		s.stale = true // what the build stored may serve no build
	}
	*cur = b
	return s.save(r)
}

// SetWarmError records why warm sandboxes of a build fail to start (""
// clears it). A template or build that is gone is not an error.
func (s *Store) SetWarmError(templateID, buildID, why string) error {
	_, err := retry(func() (struct{}, error) { return struct{}{}, s.setWarmError(templateID, buildID, why) })
	return err
}

func (s *Store) setWarmError(templateID, buildID, why string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, ok := s.templates[templateID]
	if !ok {
		return nil
	}
	b := r.Build(buildID)
	if b == nil || b.WarmError == why {
		return nil
	}
	b.WarmError = why
	return s.save(r)
}

// RequestCancel cancels an unfinished build: a waiting one ends at once
// as failed with reason, a running one is marked CancelRequested for the
// process that runs it to stop. It returns the build as recorded; a build
// that ended already is a Conflict.
func (s *Store) RequestCancel(templateID, buildID, reason string) (Build, error) {
	return retry(func() (Build, error) { return s.requestCancel(templateID, buildID, reason) })
}

func (s *Store) requestCancel(templateID, buildID, reason string) (Build, error) {
	if err := s.lock(); err != nil {
		return Build{}, err
	}
	defer s.mu.Unlock()
	r, ok := s.templates[templateID]
	if !ok {
		return Build{}, errs.New(errs.NotFound, "template '%s' not found", templateID)
	}
	b := r.Build(buildID)
	switch {
	case b == nil:
		return Build{}, errs.New(errs.NotFound, "build %s of template %s not found", buildID, templateID)
	case !b.Unfinished():
		return *b, errs.New(errs.Conflict, "build %s has ended already (%s)", buildID, b.Status)
	case b.CancelRequested:
		return *b, nil
	}
	was := *b
	if b.Status == StatusWaiting {
		b.Status, b.Reason, b.FinishedAt = StatusError, reason, time.Now().UTC()
	} else {
		b.CancelRequested = true
	}
	if err := s.save(r); err != nil {
		*b = was
		return Build{}, err
	}
	return *b, nil
}

// BuiltOn names the node of a template's newest build that ran on one
// ("" when none did, or the template is unknown).
func (s *Store) BuiltOn(templateID string) string {
	s.lockStale()
	defer s.mu.Unlock()
	r, ok := s.templates[templateID]
	if !ok {
		return ""
	}
	for i := len(r.Builds) - 1; i >= 0; i-- {
		if b := r.Builds[i]; b.Node != "" && b.Status == StatusReady {
			return b.Node
		}
	}
	return ""
}

// Cached names the templates whose newest ready build's layers are all
// in this store: a cluster places their sandboxes here first.
func (s *Store) Cached() []string {
	s.lockStale()
	defer s.mu.Unlock()
	var out []string
	for id, r := range s.templates {
		for i := len(r.Builds) - 1; i >= 0; i-- {
			b := r.Builds[i]
			if b.Status != StatusReady {
				continue
			}
			if len(b.Image.Layers) > 0 && !slices.ContainsFunc(b.Image.Layers, func(l string) bool { return !s.layers.Has(l) }) {
				out = append(out, id)
			}
			break
		}
	}
	sort.Strings(out)
	return out
}

// Tag points tags of a template at a ready build.
func (s *Store) Tag(team, target string, tags []string) (string, error) {
	return retry(func() (string, error) { return s.tag(team, target, tags) })
}

func (s *Store) tag(team, target string, tags []string) (string, error) {
	if err := s.lock(); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	r, tag, err := s.find(team, target)
	if err != nil {
		return "", err
	}
	if err := canChange(r, team, target); err != nil {
		return "", err
	}
	b := r.tagged(tag)
	if b == nil {
		return "", errs.New(errs.NotFound, "template %s has no ready build", target)
	}
	for _, t := range tags {
		if err := validTag(t); err != nil {
			return "", err
		}
		r.Tags[t] = b.ID
	}
	return b.ID, s.save(r)
}

// Untag removes tags of a template.
func (s *Store) Untag(team, name string, tags []string) error {
	_, err := retry(func() (struct{}, error) { return struct{}{}, s.untag(team, name, tags) })
	return err
}

func (s *Store) untag(team, name string, tags []string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, _, err := s.find(team, name)
	if err != nil {
		return err
	}
	if err := canChange(r, team, name); err != nil {
		return err
	}
	for _, t := range tags {
		delete(r.Tags, t)
	}
	return s.save(r)
}

// canChange lets team change its own template: a built-in one is
// read-only, another team's is not found.
func canChange(r *Record, team, ref string) error {
	switch {
	case r.Public:
		return errs.New(errs.InvalidArgument, "the built-in template %s cannot be changed", ref)
	case r.Team != team:
		return errs.New(errs.NotFound, "template '%s' not found", ref)
	}
	return nil
}

// Delete removes a template. Its layers stay while a sandbox or a build
// still stacks them: Collect removes them once nothing does.
func (s *Store) Delete(team, ref string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, _, err := s.find(team, ref)
	if err != nil {
		return err
	}
	if err := canChange(r, team, ref); err != nil {
		return err
	}
	for _, b := range r.Builds {
		if b.Unfinished() {
			return errs.New(errs.Conflict, "template %s has a build in progress", ref)
		}
	}
	if s.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), recordsTimeout)
		defer cancel()
		s.gen = -1
		if err := s.shared.DeleteTemplate(ctx, r.ID); err != nil {
			return fmt.Errorf("delete template %s: %w", r.ID, err)
		}
	} else if err := os.Remove(s.recordPath(r.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	delete(s.templates, r.ID)
	s.stale = true
	return nil
}

// Collect removes layers that no template build or sandbox (inUse: layer
// paths) uses. While a build runs it does nothing: the build's end
// collects again.
func (s *Store) Collect(inUse map[string]bool) (removed int, err error) {
	if !s.building.TryLock() {
		return 0, nil
	}
	defer s.building.Unlock()
	s.mu.Lock()
	filesDue := time.Since(s.filesCollected) > time.Hour
	if filesDue {
		s.filesCollected = time.Now()
	}
	s.mu.Unlock()
	if filesDue {
		s.collectFiles()
	}
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	keep, keepImages := map[string]bool{}, map[string]bool{}
	for _, r := range s.templates {
		for _, b := range r.Builds {
			for _, l := range b.Image.Layers {
				keep[l] = true
			}
			if b.Snapshot != nil && b.Snapshot.Image != nil {
				keepImages[b.Snapshot.Image.Name] = true
			}
		}
	}
	images, _ := os.ReadDir(filepath.Join(s.dir, "images"))
	for _, e := range images {
		if keepImages[e.Name()] {
			continue
		}
		if err := fsutil.RemoveTree(s.imagePath(e.Name())); err != nil {
			return removed, fmt.Errorf("remove image %s: %w", e.Name(), err)
		}
		removed++
	}
	names, err := s.layers.list()
	if err != nil {
		return 0, err
	}
	held := false // a layer only a sandbox keeps: collect again when it ends
	for _, n := range names {
		if keep[n] {
			continue
		}
		if inUse[s.layers.Path(n)] {
			held = true
			continue
		}
		if err := s.layers.remove(n); err != nil {
			return removed, fmt.Errorf("remove layer %s: %w", n, err)
		}
		removed++
	}
	s.stale = held
	return removed, nil
}

// Tidy runs Collect when it has anything to look at (Stale), and logs
// what it removed: at every sandbox's end.
func (s *Store) Tidy(inUse func() map[string]bool) {
	if !s.Stale() {
		return // the common case at a sandbox's end: nothing to look at
	}
	n, err := s.Collect(inUse())
	if err != nil {
		s.log.Error("collect template layers", logx.Err(err))
	} else if n > 0 {
		s.log.Info("removed unused template layers", "count", n)
	}
}

// Stale reports whether Collect has anything to look at: a layer may have
// lost its last template build (here, or in the shared records), or
// uploaded archives are due. A node asks
// before it lists the layers its sandboxes use, at every sandbox's end.
func (s *Store) Stale() bool {
	s.lockStale() // shared records changed elsewhere make it stale
	defer s.mu.Unlock()
	return s.stale || time.Since(s.filesCollected) > time.Hour
}

func (s *Store) recordPath(id string) string {
	return filepath.Join(s.dir, "templates", id+".json")
}

// save writes a record atomically, to the shared records or to its file
// (the base template is not stored).
func (s *Store) save(r *Record) error {
	if r.ID == BaseName {
		return nil
	}
	if s.shared != nil {
		return s.put(r)
	}
	return fsutil.WriteJSON(s.recordPath(r.ID), r)
}

func (r *Record) clone() Record {
	c := *r
	c.Names = slices.Clone(r.Names)
	c.Tags = map[string]string{}
	for k, v := range r.Tags {
		c.Tags[k] = v
	}
	c.Builds = nil
	for _, b := range r.Builds {
		bc := *b
		c.Builds = append(c.Builds, &bc)
	}
	return c
}

// validName checks a template name: lowercase letters, digits, '-', '_', '.'
// and '/' (E2B's team/name form), 1 to 128 characters, each '/'-separated
// part starting with a letter or a digit (no "..", no empty part).
func validName(name string) error {
	if name == "" || len(name) > 128 {
		return errs.New(errs.InvalidArgument, "template name must have 1 to 128 characters")
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && !strings.ContainsRune("-_./", c) {
			return errs.New(errs.InvalidArgument, "template name %q may hold only lowercase letters, digits, '-', '_', '.' and '/'", name)
		}
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || strings.ContainsRune("-_.", rune(part[0])) {
			return errs.New(errs.InvalidArgument, "template name %q: each part between '/' must start with a letter or a digit", name)
		}
	}
	return nil
}

func validTag(tag string) error {
	if tag == "" || len(tag) > 128 {
		return errs.New(errs.InvalidArgument, "tag must have 1 to 128 characters")
	}
	for _, c := range tag {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && !strings.ContainsRune("-_.", c) {
			return errs.New(errs.InvalidArgument, "tag %q may hold only letters, digits, '-', '_' and '.'", tag)
		}
	}
	return nil
}

// newID returns a template id: 20 characters of [a-z0-9].
func newID() string { return ids.New("", 20) }
