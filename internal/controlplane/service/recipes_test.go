package service

import (
	"context"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestRecipeRebuiltWhenChanged: a built-in recipe built by an older
// version of Cove, whose recipe this version changed, serves while it is
// rebuilt in the background, the recipe it starts from first; a rebuild
// that fails is not tried again at every use (its older build serves), and
// an explicit Prepare tries it again.
func TestRecipeRebuiltWhenChanged(t *testing.T) {
	saved := template.Recipes
	t.Cleanup(func() { template.Recipes = saved })
	recipes := func(parent string, child ...string) map[string]template.Spec {
		return map[string]template.Spec{
			"parent": {Steps: []template.Step{{Type: "ENV", Args: []string{"PARENT", parent}}}},
			"child":  {FromTemplate: "parent", Steps: []template.Step{{Type: "ENV", Args: child}}},
		}
	}
	dir := t.TempDir()
	// start is a start of Cove whose recipes are these, on dir.
	start := func(r map[string]template.Spec) (*template.Store, *Templates) {
		template.Recipes = r
		st, err := template.NewStore(dir, logx.Discard())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ts := NewTemplates(ctx, st, template.NewBuilder(st, nil, logx.Discard()), func() map[string]bool { return nil }, []byte("secret"), logx.Discard())
		t.Cleanup(func() { cancel(); ts.Wait() })
		return st, ts
	}
	// env is what a sandbox of child starts with now (nil: none is ready).
	env := func(st *template.Store) map[string]string {
		t.Helper()
		tpl, err := st.Resolve(context.Background(), "team", "child")
		if errs.Is(err, errs.NotFound) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		return tpl.Env
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		if !testkit.Wait(30*time.Second, cond) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
	builds := func(st *template.Store, name string) []*template.Build {
		t.Helper()
		r, err := st.Get("", name)
		if err != nil {
			t.Fatal(err)
		}
		return r.Builds
	}

	// The first version: built on first use.
	st, ts := start(recipes("1", "CHILD", "1"))
	if err := ts.CanUse("team", "child"); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("first use: %v, want it being prepared", err)
	}
	wait("the first build", func() bool { return env(st)["CHILD"] == "1" })
	first := builds(st, "child")[0]

	// A version whose parent recipe changed: both are rebuilt, and the
	// child's older build serves meanwhile.
	st, ts = start(recipes("2", "CHILD", "1"))
	if err := ts.CanUse("team", "child"); err != nil {
		t.Fatalf("use of a recipe built by an older version: %v, want its older build", err)
	}
	wait("the rebuild", func() bool { return env(st)["PARENT"] == "2" })
	if e := env(st); e["CHILD"] != "1" {
		t.Errorf("rebuilt child: %v", e)
	}
	for _, name := range []string{"parent", "child"} {
		b := builds(st, name)
		if last := b[len(b)-1]; len(b) != 2 || last.Recipe != template.RecipeVersion(name) || last.Status != template.StatusReady {
			t.Errorf("%s's builds: %d, the last %+v", name, len(b), last)
		}
	}
	if _, err := st.ResolveBuild(context.Background(), "child", first.ID); err != nil {
		t.Errorf("the older build, which sandboxes may still run: %v", err)
	}
	if err := ts.CanUse("team", "child"); err != nil || len(builds(st, "child")) != 2 {
		t.Errorf("a use of the rebuilt recipe: %v, %d builds", err, len(builds(st, "child")))
	}

	// A version whose child recipe fails: tried once, the older build
	// serves, Prepare tries again.
	st, ts = start(recipes("2", "CHILD"))
	if err := ts.CanUse("team", "child"); err != nil {
		t.Fatalf("use while the rebuild runs: %v", err)
	}
	failed := func() bool {
		b := builds(st, "child")
		return b[len(b)-1].Status == template.StatusError
	}
	wait("the rebuild to fail", failed)
	for range 3 {
		if err := ts.CanUse("team", "child"); err != nil {
			t.Errorf("use after a failed rebuild: %v", err)
		}
	}
	if n := len(builds(st, "child")); n != 3 {
		t.Errorf("%d builds of child after a failed rebuild and uses, want 3: it was tried again", n)
	}
	if len(builds(st, "parent")) != 2 {
		t.Errorf("parent, unchanged, was rebuilt")
	}
	if e := env(st); e["CHILD"] != "1" || e["PARENT"] != "2" {
		t.Errorf("what serves after a failed rebuild: %v", e)
	}
	if _, err := ts.Prepare("child"); err != nil {
		t.Fatal(err)
	}
	wait("the build Prepare started to fail", failed)
	if n := len(builds(st, "child")); n != 4 {
		t.Errorf("%d builds of child after Prepare, want 4", n)
	}
}
