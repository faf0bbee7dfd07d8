package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/volume"
)

// TestVolumes: a cluster's volume records — a name once per team, found
// by id or name within the team only, listed by team and by node, removed
// once.
func TestVolumes(t *testing.T) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, testutil.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now().UTC().Truncate(time.Microsecond)
	a := volume.Volume{ID: volume.NewID(), Team: "a", Name: "data", Node: "n1", SizeMB: 64, CreatedAt: at}
	b := volume.Volume{ID: volume.NewID(), Team: "a", Name: "more", Node: "n2", SizeMB: 64, CreatedAt: at.Add(time.Second)}
	c := volume.Volume{ID: volume.NewID(), Team: "c", Name: "data", Node: "n1", SizeMB: 64, CreatedAt: at}
	for _, v := range []volume.Volume{a, b, c} {
		if err := st.AddVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AddVolume(ctx, volume.Volume{ID: volume.NewID(), Team: "a", Name: "data", Node: "n2", CreatedAt: at}); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("a team's name twice: %v", err)
	}
	for _, tc := range []struct {
		team, ref string
		want      volume.Volume
	}{{"a", "data", a}, {"a", a.ID, a}, {"c", "data", c}, {"a", b.ID, b}} {
		if got, err := st.Volume(ctx, tc.team, tc.ref); err != nil || got != tc.want {
			t.Errorf("volume %s of %s: %+v %v", tc.ref, tc.team, got, err)
		}
	}
	if _, err := st.Volume(ctx, "c", a.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("another team's volume by id: %v", err)
	}
	if got, err := st.VolumeByID(ctx, c.ID); err != nil || got != c {
		t.Errorf("by id: %+v %v", got, err)
	}
	if got, err := st.TeamVolumes(ctx, "a"); err != nil || len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("team a's volumes: %+v %v", got, err)
	}
	if got, err := st.NodeVolumes(ctx, "n1"); err != nil || len(got) != 2 {
		t.Errorf("n1's volumes: %+v %v", got, err)
	}
	if got, err := st.RemoveVolume(ctx, "a", "data"); err != nil || got != a {
		t.Errorf("remove: %+v %v", got, err)
	}
	if _, err := st.RemoveVolume(ctx, "a", "data"); !errs.Is(err, errs.NotFound) {
		t.Errorf("remove again: %v", err)
	}
	if _, err := st.RemoveVolume(ctx, "a", c.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("remove another team's: %v", err)
	}
	if got, err := st.VolumeByID(ctx, c.ID); err != nil || got != c {
		t.Errorf("team c's volume after team a's went: %+v %v", got, err)
	}
}
