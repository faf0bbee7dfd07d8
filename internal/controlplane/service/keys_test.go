package service_test

import (
	"context"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// TestKeys: what `cove key`, the key API and the dashboard do with a
// team's API keys. A key is shown once and kept as its hash; another
// team's key is not found; a team's last key is not revoked.
func TestKeys(t *testing.T) {
	t.Parallel()
	_, _, st := newService(t, service.Config{})
	ctx := context.Background()
	acme, err := service.CreateTeam(ctx, st, "acme", store.TeamQuota{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := service.CreateTeam(ctx, st, "other", store.TeamQuota{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "   ", string(make([]byte, 101))} {
		if _, _, err := service.CreateKey(ctx, st, "acme", name); !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("a key named %q: %v, want InvalidArgument", name, err)
		}
	}
	if _, _, err := service.CreateKey(ctx, st, "nobody", "ci"); !errs.Is(err, errs.NotFound) {
		t.Errorf("a key of no team: %v, want NotFound", err)
	}
	raw, first, err := service.CreateKey(ctx, st, "acme", " ci ")
	if err != nil {
		t.Fatal(err)
	}
	if first.Hash != auth.HashAPIKey(raw) || first.Name != "ci" || first.Team != acme.ID || first.Mask != auth.Mask(raw) {
		t.Errorf("the key kept: %+v (of %s)", first, raw)
	}
	if _, _, err := service.CreateKey(ctx, st, "other", "theirs"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first.ID(), first.Hash} {
		if k, err := service.TeamKey(ctx, st, acme.ID, id); err != nil || k.Hash != first.Hash {
			t.Errorf("acme's key by %s: %+v, %v", id, k, err)
		}
		if _, err := service.TeamKey(ctx, st, other.ID, id); !errs.Is(err, errs.NotFound) {
			t.Errorf("acme's key as other's, by %s: %v, want NotFound", id, err)
		}
	}
	if _, err := service.RevokeKey(ctx, st, acme.ID, first.ID()); !errs.Is(err, errs.Conflict) {
		t.Errorf("revoking a team's last key: %v, want Conflict", err)
	}
	_, second, err := service.CreateKey(ctx, st, "acme", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := service.RevokeKey(ctx, st, other.ID, first.ID()); !errs.Is(err, errs.NotFound) {
		t.Errorf("other revoking acme's key: %v, want NotFound", err)
	}
	if _, err := service.RevokeKey(ctx, st, acme.ID, first.ID()); err != nil {
		t.Fatalf("revoking one of two keys: %v", err)
	}
	keys, err := st.TeamAPIKeys(ctx, acme.ID)
	if err != nil || len(keys) != 1 || keys[0].Hash != second.Hash {
		t.Errorf("acme's keys after the revoke: %+v, %v", keys, err)
	}
}
