package template

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

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
