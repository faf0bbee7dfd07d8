package template

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/isolation"
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

	certs := t.TempDir()
	b.HostCerts = certs
	var tpl Template
	if err := b.withDebCache(&tpl); err != nil {
		t.Fatal(err)
	}
	if n := len(tpl.RootFS.Layers); n != 1 {
		t.Fatalf("layers: %v", tpl.RootFS.Layers)
	}
	for _, target := range []string{debCacheTarget, hostCertsTarget} {
		if st, err := os.Stat(filepath.Join(tpl.RootFS.Layers[0], target)); err != nil || !st.IsDir() || st.Mode().Perm() != 0o755 {
			t.Errorf("the mount point layer's %s: %v %v", target, st, err)
		}
	}
	want := []isolation.Bind{{Source: cache, Target: debCacheTarget}, {Source: certs, Target: hostCertsTarget}}
	if bs := tpl.RootFS.Binds; !slices.Equal(bs, want) {
		t.Errorf("binds: %+v, want %+v", bs, want)
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

// TestDepsInstallsRecipePackages: test/compat runs the code interpreter
// and the desktop over the host's /usr, so scripts/deps.sh installs on the
// host the code interpreter's kernels and every package the desktop adds.
func TestDepsInstallsRecipePackages(t *testing.T) {
	script, err := os.ReadFile("../../scripts/deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(string(script), func(r rune) bool { return strings.ContainsRune(" \t\n;\\", r) }) {
		words[w] = true
	}
	for _, groups := range [][][]string{{CodeInterpreterKernels}, DesktopPackages} {
		for _, pkgs := range groups {
			for _, pkg := range pkgs {
				if !words[pkg] {
					t.Errorf("scripts/deps.sh does not install %s", pkg)
				}
			}
		}
	}
}

// TestRecipesWeighedAndOrdered: every recipe has a measured weight for
// its base and each step (what progress reports weigh), and comes in
// RecipeOrder after the recipe it starts from.
func TestRecipesWeighedAndOrdered(t *testing.T) {
	if len(RecipeOrder) != len(Recipes) {
		t.Errorf("RecipeOrder %v does not list the %d recipes", RecipeOrder, len(Recipes))
	}
	for i, name := range RecipeOrder {
		spec, ok := Recipes[name]
		if !ok {
			t.Errorf("RecipeOrder names %s, no recipe", name)
			continue
		}
		if got, want := len(RecipeSeconds[name]), len(spec.Steps)+1; got != want {
			t.Errorf("%s: %d weights, want %d (its base and %d steps)", name, got, want, len(spec.Steps))
		}
		if spec.FromTemplate != "" && !slices.Contains(RecipeOrder[:i], spec.FromTemplate) {
			t.Errorf("%s comes before %s, which it starts from", name, spec.FromTemplate)
		}
	}
	if _, ok := Recipes[PreparedAhead]; !ok {
		t.Errorf("PreparedAhead %s is not a recipe", PreparedAhead)
	}
}

// TestRecipeVersion: a recipe's version changes with its spec and with the
// recipe it starts from, and with nothing else.
func TestRecipeVersion(t *testing.T) {
	saved := Recipes
	t.Cleanup(func() { Recipes = saved })
	before := map[string]string{}
	for _, name := range RecipeOrder {
		before[name] = RecipeVersion(name)
		if len(before[name]) != 16 || RecipeVersion(name) != before[name] {
			t.Errorf("%s: version %q, then %q", name, before[name], RecipeVersion(name))
		}
	}
	if RecipeVersion("base") != "" {
		t.Error("base, no recipe, has a version")
	}
	for _, c := range []struct {
		recipe  string
		change  func(*Spec)
		changed []string
	}{
		{"debian", func(s *Spec) { s.FromDebootstrap = &Debootstrap{Suite: "trixie"} }, []string{"debian", "desktop"}},
		{"code-interpreter-v1", func(s *Spec) { s.StartCmd = "/.cove/cove-envd code-interpreter" }, []string{"code-interpreter-v1"}},
		{"desktop", func(s *Spec) { s.MemoryMB = 4096 }, []string{"desktop"}},
	} {
		Recipes = maps.Clone(saved)
		spec := Recipes[c.recipe]
		c.change(&spec)
		Recipes[c.recipe] = spec
		for _, name := range RecipeOrder {
			if changed := RecipeVersion(name) != before[name]; changed != slices.Contains(c.changed, name) {
				t.Errorf("a change to %s: %s's version changed: %v", c.recipe, name, changed)
			}
		}
	}
}

// TestDebianArchivePackages: the tests' Debian archive
// (scripts/debian-archive.sh) holds what the debian recipe installs: its
// debootstrap's packages and its apt-get steps'.
func TestDebianArchivePackages(t *testing.T) {
	script, err := os.ReadFile("../../scripts/debian-archive.sh")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(string(script), "\n") {
		if v, ok := strings.CutPrefix(line, "packages=\""); ok {
			listed = strings.Fields(strings.TrimSuffix(v, "\""))
		}
	}
	spec := Recipes["debian"]
	want := slices.Clone(spec.FromDebootstrap.Include)
	for _, s := range spec.Steps {
		if s.Type != "RUN" {
			continue
		}
		if _, after, ok := strings.Cut(s.Args[0], "--force-unsafe-io "); ok {
			pkgs, _, _ := strings.Cut(after, " &&")
			want = append(want, strings.Fields(pkgs)...)
		}
	}
	if !strings.Contains(string(script), " "+spec.FromDebootstrap.Suite+"\n") && !strings.Contains(string(script), "suite="+spec.FromDebootstrap.Suite) {
		t.Errorf("the script does not capture %s", spec.FromDebootstrap.Suite)
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("scripts/debian-archive.sh captures %v, the debian recipe installs %v", listed, want)
	}
}
