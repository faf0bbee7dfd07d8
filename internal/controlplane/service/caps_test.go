package service_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/secrets"
)

// TestTeamRecordsCapped: a team's secrets (E2B's 50) and API keys (100)
// are capped, the one past the cap refused naming it, another team's
// untouched, and one freed makes room again.
func TestTeamRecordsCapped(t *testing.T) {
	t.Parallel()
	key, err := secrets.NewKey(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	svc, _, st := newService(t, service.Config{SecretsKey: key})
	ctx := context.Background()
	var teams []string
	for _, name := range []string{"acme", "other"} {
		tm, err := service.CreateTeam(ctx, st, name, store.TeamQuota{})
		if err != nil {
			t.Fatal(err)
		}
		teams = append(teams, tm.ID)
	}
	acme, other := teams[0], teams[1]

	var first store.TeamSecret
	for i := range service.MaxTeamSecrets {
		sec, err := svc.CreateSecret(ctx, acme, service.NewSecret{Name: fmt.Sprintf("S%d", i), Value: "v"})
		if err != nil {
			t.Fatalf("secret %d: %v", i, err)
		}
		if i == 0 {
			first = sec
		}
	}
	_, err = svc.CreateSecret(ctx, acme, service.NewSecret{Name: "ONE_MORE", Value: "v"})
	if !errs.Is(err, errs.Conflict) || errs.HintOf(err).Code != errs.CodeSecretLimit {
		t.Errorf("the secret past the cap: %v (code %q), want Conflict, %s", err, errs.HintOf(err).Code, errs.CodeSecretLimit)
	}
	if _, err := svc.CreateSecret(ctx, other, service.NewSecret{Name: "ONE_MORE", Value: "v"}); err != nil {
		t.Errorf("another team's secret: %v", err)
	}
	if err := svc.DeleteSecret(ctx, acme, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateSecret(ctx, acme, service.NewSecret{Name: "ONE_MORE", Value: "v"}); err != nil {
		t.Errorf("a secret once one was deleted: %v", err)
	}

	var firstKey store.APIKey
	for i := range service.MaxTeamAPIKeys {
		_, k, err := service.CreateKey(ctx, st, acme, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
		if i == 0 {
			firstKey = k
		}
	}
	if _, _, err := service.CreateKey(ctx, st, acme, "one-more"); !errs.Is(err, errs.QuotaExceeded) {
		t.Errorf("the key past the cap: %v, want QuotaExceeded", err)
	}
	if _, _, err := service.CreateKey(ctx, st, other, "theirs"); err != nil {
		t.Errorf("another team's key: %v", err)
	}
	if err := st.DeleteAPIKey(ctx, acme, firstKey.Hash); err != nil {
		t.Fatal(err)
	}
	if _, _, err := service.CreateKey(ctx, st, acme, "one-more"); err != nil {
		t.Errorf("a key once one was deleted: %v", err)
	}
}
