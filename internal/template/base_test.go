package template

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestBaseLayerReused: a restart reuses the base layer it built (nothing
// it is made from changed), and builds it again, identical, when the layer
// is gone or the recorded fingerprint does not match.
func TestBaseLayerReused(t *testing.T) {
	testkit.NeedRoot(t, "the base layer's owners need root")
	dir := t.TempDir()
	layer := func() string {
		t.Helper()
		s, err := NewStore(dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return s.templates[BaseName].Builds[0].Image.Layers[0]
	}
	first := layer()
	st, err := os.Stat(filepath.Join(dir, "layers", first))
	if err != nil {
		t.Fatal(err)
	}
	if again := layer(); again != first {
		t.Fatalf("restart: base layer %s, then %s", first, again)
	}
	if st2, _ := os.Stat(filepath.Join(dir, "layers", first)); !os.SameFile(st, st2) {
		t.Errorf("restart rebuilt the base layer though nothing changed")
	}

	if err := fsutil.RemoveTree(filepath.Join(dir, "layers", first)); err != nil {
		t.Fatal(err)
	}
	if again := layer(); again != first {
		t.Errorf("after the layer went: %s, want it built again as %s", again, first)
	}
	if _, err := os.Stat(filepath.Join(dir, "layers", first)); err != nil {
		t.Errorf("the layer was not built again: %v", err)
	}

	if err := fsutil.WriteJSON(filepath.Join(dir, "base.json"), map[string]string{"Fingerprint": "stale", "Layer": "sha256-gone"}); err != nil {
		t.Fatal(err)
	}
	if again := layer(); again != first {
		t.Errorf("after a stale fingerprint: %s, want %s", again, first)
	}
}

func TestMissingCommands(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"usr/bin/bash", "usr/bin/python3", "bin/git", "usr/bin/gcc", "usr/bin/curl"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), nil, 0o755)
	}
	os.WriteFile(filepath.Join(root, "usr/bin/node"), nil, 0o644) // not executable
	got := missingCommands(root)
	want := []string{"nodejs", "npm", "ncurses-bin", "build-essential"}
	if !slices.Equal(got, want) {
		t.Errorf("missing %v, want %v", got, want)
	}
}

// TestBaseName: the name base resolves to the host template until SetBase
// hands it to a built-in recipe with a ready build, then to that; the
// host template stays host, and by its id (base) — what a sandbox
// recorded — whoever holds the name.
func TestBaseName(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	names := func(ref string) (string, []string) {
		t.Helper()
		r, err := s.Get("team", ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		return r.ID, r.Names
	}
	if id, n := names("base"); id != BaseName || !slices.Equal(n, []string{BaseName, HostName}) {
		t.Errorf("base before: %s %v", id, n)
	}
	if err := s.SetBase("debian"); !errs.Is(err, errs.Conflict) {
		t.Errorf("base handed to a recipe with no ready build: %v", err)
	}
	// debian built (its record as a build leaves it).
	s.mu.Lock()
	deb := s.templates["debian"]
	deb.Builds = []*Build{{ID: "b1", Status: StatusReady, Image: Image{Layers: []string{s.templates[BaseName].Builds[0].Image.Layers[0]}}}}
	deb.Tags[DefaultTag] = "b1"
	s.mu.Unlock()
	if err := s.SetBase("debian"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref, id string
		names   []string
	}{
		{"base", "debian", []string{BaseName, "debian"}},
		{"base:default", "debian", []string{BaseName, "debian"}},
		{"debian", "debian", []string{BaseName, "debian"}},
		{"host", BaseName, []string{HostName}},
	} {
		if id, n := names(c.ref); id != c.id || !slices.Equal(n, c.names) {
			t.Errorf("%s: %s %v, want %s %v", c.ref, id, n, c.id, c.names)
		}
	}
	if tpl, err := s.ResolveBuild(ctx, BaseName, BaseName); err != nil || tpl.ID != BaseName || len(tpl.RootFS.Binds) == 0 {
		t.Errorf("the host template by its ids: %+v %v", tpl, err)
	}
	if tpl, err := s.Resolve(ctx, "team", "base"); err != nil || tpl.ID != "debian" || tpl.BuildID != "b1" {
		t.Errorf("resolve base: %s %s %v", tpl.ID, tpl.BuildID, err)
	}
	listed := map[string][]string{}
	for _, r := range s.List("team") {
		listed[r.ID] = r.Names
	}
	if !slices.Equal(listed[BaseName], []string{HostName}) || !slices.Equal(listed["debian"], []string{BaseName, "debian"}) {
		t.Errorf("listed: %v", listed)
	}
	if s.Base() != "debian" {
		t.Errorf("Base: %s", s.Base())
	}
	if err := s.SetBase(""); err != nil || s.Base() != BaseName {
		t.Errorf("base back to the host: %v %s", err, s.Base())
	}
	if id, _ := names("base"); id != BaseName {
		t.Errorf("base after it came back: %s", id)
	}
}

// A built-in recipe's build is started once: a second start while it is
// unfinished (a cluster's other replica) joins it; once it ended, a start
// starts another.
func TestNewRecipeBuildJoins(t *testing.T) {
	s := newStore(t)
	first, started, err := s.NewRecipeBuild("debian", 2, 1024)
	if err != nil || !started {
		t.Fatalf("first start: %v %v", started, err)
	}
	again, started, err := s.NewRecipeBuild("debian", 2, 1024)
	if err != nil || started || again.ID != first.ID {
		t.Fatalf("a start while it is unfinished: %s started %v %v, want %s joined", again.ID, started, err, first.ID)
	}
	first.Status, first.Reason = StatusError, "failed"
	if err := s.SetBuild("debian", *first); err != nil {
		t.Fatal(err)
	}
	next, started, err := s.NewRecipeBuild("debian", 2, 1024)
	if err != nil || !started || next.ID == first.ID {
		t.Errorf("a start after it failed: %s started %v %v", next.ID, started, err)
	}
}
