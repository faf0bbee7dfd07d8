package template

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
)

// TestDebCache: a recipe's step sees the package cache read-only over a
// layer holding its mount point; after the step the packages apt-get left
// move into the cache and out of the layer, with the links to the cache
// the step made, and nothing else is taken (links out, directories, files
// of other names).
func TestDebCache(t *testing.T) {
	s := newStore(t)
	b := NewBuilder(s, nil, logx.Discard())
	cache, err := b.debCache()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(cache); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the cache's directory: %v %v", st, err)
	}
	os.WriteFile(filepath.Join(cache, "kept_1_all.deb"), []byte("kept"), 0o644)

	var tpl Template
	if err := b.withDebCache(&tpl); err != nil {
		t.Fatal(err)
	}
	if n := len(tpl.RootFS.Layers); n != 1 {
		t.Fatalf("layers: %v", tpl.RootFS.Layers)
	}
	if st, err := os.Stat(filepath.Join(tpl.RootFS.Layers[0], debCacheTarget)); err != nil || !st.IsDir() || st.Mode().Perm() != 0o755 {
		t.Errorf("the mount point layer: %v %v", st, err)
	}
	if bs := tpl.RootFS.Binds; len(bs) != 1 || bs[0].Source != cache || bs[0].Target != debCacheTarget || bs[0].Writable {
		t.Errorf("binds: %+v", bs)
	}

	upper := t.TempDir()
	archives := filepath.Join(upper, aptArchives)
	os.MkdirAll(filepath.Join(archives, "partial"), 0o755)
	os.MkdirAll(filepath.Join(archives, "dir.deb"), 0o755)
	os.WriteFile(filepath.Join(archives, "new_2_amd64.deb"), []byte("fetched"), 0o600)
	os.WriteFile(filepath.Join(archives, "kept_1_all.deb"), []byte("fetched again"), 0o644)
	os.WriteFile(filepath.Join(archives, "lock"), nil, 0o640)
	os.Symlink(debCacheTarget+"/kept_1_all.deb", filepath.Join(archives, "linked_1_all.deb"))
	os.Symlink("/etc/shadow", filepath.Join(archives, "shadow.deb"))
	if err := b.harvestDebs(upper); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"new_2_amd64.deb": "fetched", "kept_1_all.deb": "kept"} {
		if got, err := os.ReadFile(filepath.Join(cache, name)); err != nil || string(got) != want {
			t.Errorf("cached %s: %q %v, want %q", name, got, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(cache, "new_2_amd64.deb")); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("a cached package's mode: %v %v", st, err)
	}
	for _, name := range []string{"shadow.deb", "linked_1_all.deb", "dir.deb"} {
		if _, err := os.Lstat(filepath.Join(cache, name)); err == nil {
			t.Errorf("%s was taken into the cache", name)
		}
	}
	left, _ := os.ReadDir(archives)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if want := "dir.deb lock partial"; strings.Join(names, " ") != want {
		t.Errorf("left in the layer: %q, want %q", strings.Join(names, " "), want)
	}
	if err := b.harvestDebs(t.TempDir()); err != nil {
		t.Errorf("a step that ran no apt-get: %v", err)
	}
}
