package service

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// TestTeamQuota: a team's own quota replaces the server's field by field
// (0 keeps the server's); a team only its keys named has the server's.
func TestTeamQuota(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	server := sandboxes.TeamQuota{Sandboxes: 10, CPUs: 20, MemoryMB: 1000, DiskMB: 2000, StorageMB: 3000}
	s := New(Config{TeamQuota: server}, st, nil, nil, logx.Discard())
	cpus, mem := 4, int64(512)
	team, err := CreateTeam(ctx, st, "acme", store.TeamQuota{MaxCPUs: &cpus, MaxMemoryMB: &mem})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		team string
		want sandboxes.TeamQuota
	}{
		{team.ID, sandboxes.TeamQuota{Sandboxes: 10, CPUs: 4, MemoryMB: 512, DiskMB: 2000, StorageMB: 3000}},
		{"keys-only", server},
	} {
		if got, err := s.TeamQuota(ctx, tc.team); err != nil || got != tc.want {
			t.Errorf("team %s: %+v %v, want %+v", tc.team, got, err, tc.want)
		}
	}
	neg := -1
	if _, err := CreateTeam(ctx, st, "bad", store.TeamQuota{MaxSandboxes: &neg}); !errs.Is(err, errs.InvalidArgument) {
		t.Errorf("a negative quota: %v", err)
	}
	if _, err := st.Team(ctx, "bad"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a team refused for its quota was made: %v", err)
	}
}
