package postgres_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/objstore"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestTemplatesShared runs three template stores — an API replica's and
// two nodes', each with its own directory — over one database and one
// real S3 bucket: a template made through the replica and built on one
// node is resolved on the other, which fetches its layers; changes made
// at once through all three are all kept; a delete through one is seen by
// all; a node that restarts fails its own unfinished builds, no other's.
func TestTemplatesShared(t *testing.T) {
	testkit.NeedRoot(t, "needs root (layers keep owners)")
	ctx := context.Background()
	st, err := postgres.Open(ctx, testutil.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	url, creds := testutil.ObjectStore(t)
	bucket, err := objstore.Open(ctx, url, creds)
	if err != nil {
		t.Fatal(err)
	}
	open := func(node string) *template.Store {
		s, err := template.NewStore(t.TempDir(), logx.Discard())
		if err != nil {
			t.Fatal(err)
		}
		s.UseRemote(bucket)
		if err := s.UseRecords(ctx, st, node); err != nil {
			t.Fatal(err)
		}
		return s
	}
	api, n1, n2 := open(""), open("n1"), open("n2")

	rec, b, err := api.NewBuild("team", "app", nil, 1, 256)
	if err != nil {
		t.Fatal(err)
	}
	spec := template.Spec{Steps: []template.Step{{Type: "WORKDIR", Args: []string{"/srv/app"}}}}
	if err := template.NewBuilder(n1, nil, logx.Discard()).Run(ctx, rec.ID, b.ID, spec, func(template.LogEntry) {}); err != nil {
		t.Fatal(err)
	}
	got, err := api.Get("team", "app")
	if err != nil {
		t.Fatal(err)
	}
	built := got.Build(b.ID)
	if built.Status != template.StatusReady || built.Node != "n1" || len(built.Image.Blobs) != len(built.Image.Layers) {
		t.Fatalf("the build as the replica sees it: %s on %q, %d layers, %d pushed", built.Status, built.Node, len(built.Image.Layers), len(built.Image.Blobs))
	}
	tpl, err := n2.Resolve(ctx, "team", "app")
	if err != nil {
		t.Fatalf("resolve on the other node: %v", err)
	}
	found := false
	for _, l := range tpl.RootFS.Layers {
		if st, err := os.Stat(filepath.Join(l, "srv/app")); err == nil && st.IsDir() {
			found = true
		}
	}
	if !found {
		t.Errorf("no layer the other node resolved holds /srv/app: %v", tpl.RootFS.Layers)
	}

	// Tags set at once through all three: none lost.
	var wg sync.WaitGroup
	var want []string
	for i, s := range []*template.Store{api, n1, n2} {
		for j := range 4 {
			tag := fmt.Sprintf("t%d-%d", i, j)
			want = append(want, tag)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Tag("team", "app", []string{tag}); err != nil {
					t.Errorf("tag %s: %v", tag, err)
				}
			}()
		}
	}
	wg.Wait()
	got, _ = n2.Get("team", "app")
	for _, tag := range want {
		if got.Tags[tag] != b.ID {
			t.Errorf("tag %s lost: %v", tag, got.Tags)
		}
	}

	// A node restarted fails its own unfinished builds only.
	_, b1, _ := api.NewBuild("team", "on-n1", nil, 1, 256)
	_, b2, _ := api.NewBuild("team", "on-n2", nil, 1, 256)
	for _, x := range []struct {
		name string
		b    *template.Build
		node string
	}{{"on-n1", b1, "n1"}, {"on-n2", b2, "n2"}} {
		x.b.Status, x.b.Node = template.StatusBuilding, x.node
		r, _ := api.Get("team", x.name)
		if err := api.SetBuild(r.ID, *x.b); err != nil {
			t.Fatal(err)
		}
	}
	open("n1")
	for name, status := range map[string]string{"on-n1": template.StatusError, "on-n2": template.StatusBuilding} {
		r, _ := api.Get("team", name)
		if s := r.Builds[0].Status; s != status {
			t.Errorf("%s after n1's restart: %s, want %s", name, s, status)
		}
	}

	// Deleted through the replica: gone for the nodes.
	if err := api.Delete("team", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Resolve(ctx, "team", "app"); !errs.Is(err, errs.NotFound) {
		t.Errorf("resolve of a deleted template on a node: %v", err)
	}
	if names := templateNames(n2.List("team")); !slices.Equal(names, []string{"on-n1", "on-n2"}) {
		t.Errorf("the team's templates on a node: %v", names)
	}
}

func templateNames(rs []template.Record) []string {
	var out []string
	for _, r := range rs {
		if r.Team == "team" { // not the public ones
			out = append(out, r.Names...)
		}
	}
	slices.Sort(out)
	return out
}
