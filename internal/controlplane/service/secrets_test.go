package service_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/secrets"
)

// TestSecrets: a team's secrets kept sealed, named in any case, never
// answered with their value, another team's never found, a new value a
// new version; network rules may name only the team's own. A deployment
// without a secrets key keeps none.
func TestSecrets(t *testing.T) {
	t.Parallel()
	keyless, _, _ := newService(t, service.Config{})
	if _, _, err := keyless.ListSecrets(context.Background(), "t", "", 10); !errs.Is(err, errs.Unimplemented) {
		t.Errorf("secrets without a secrets key: %v, want Unimplemented", err)
	}
	key, err := secrets.NewKey(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	svc, n, st := newService(t, service.Config{SecretsKey: key})
	ctx := context.Background()
	acme, err := service.CreateTeam(ctx, st, "acme", store.TeamQuota{})
	if err != nil {
		t.Fatal(err)
	}
	team := acme.ID
	for _, bad := range []service.NewSecret{{Name: "", Value: "v"}, {Name: "a/b", Value: "v"}, {Name: "${x}", Value: "v"}, {Name: "OK_NAME", Value: ""}} {
		if _, err := svc.CreateSecret(ctx, team, bad); !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("secret %+v: %v, want InvalidArgument", bad, err)
		}
	}
	sec, err := svc.CreateSecret(ctx, team, service.NewSecret{Name: "OPENAI_KEY", Value: "sk-one"})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Sealed != nil || sec.Version != 1 {
		t.Errorf("the created secret: %+v", sec)
	}
	if _, err := svc.CreateSecret(ctx, team, service.NewSecret{Name: "OPENAI_KEY", Value: "sk-two"}); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("the same name twice: %v, want AlreadyExists", err)
	}
	for _, ref := range []string{sec.ID, "OPENAI_KEY", "openai_key"} {
		if got, err := svc.Secret(ctx, team, ref); err != nil || got.ID != sec.ID || got.Sealed != nil {
			t.Errorf("the secret by %q: %+v, %v", ref, got, err)
		}
		if _, err := svc.Secret(ctx, "u", ref); !errs.Is(err, errs.NotFound) {
			t.Errorf("another team's secret by %q: %v, want NotFound", ref, err)
		}
	}
	if up, err := svc.UpdateSecret(ctx, team, "OPENAI_KEY", "sk-two", nil); err != nil || up.Version != 2 || up.Sealed != nil {
		t.Errorf("update: %+v, %v", up, err)
	}
	if v, err := (service.Vault{Store: st, Key: key}).Reveal(ctx, team, "openai_key"); err != nil || v != "sk-two" {
		t.Errorf("the egress proxy's value: %q, %v; want the new one", v, err)
	}

	// A sandbox's rules name the team's secrets only.
	sb := create(t, svc, func(r *service.CreateRequest) { r.Team = team })
	n.Add(withNetwork(t, n, sb.ID))
	rules := func(name string) service.NetworkRules {
		r := network.Rules{"api.openai.com": {{Transform: &network.Transform{Headers: map[string]string{"Authorization": "Bearer ${e2b.secrets." + name + "}"}}}}}
		return service.NetworkRules{Rules: &r}
	}
	if err := svc.UpdateNetwork(ctx, team, sb.ID, rules("OPENAI_KEY")); err != nil {
		t.Errorf("rules naming the team's secret: %v", err)
	}
	if err := svc.UpdateNetwork(ctx, team, sb.ID, rules("NOT_OURS")); !errs.Is(err, errs.InvalidArgument) {
		t.Errorf("rules naming a secret the team lacks: %v, want InvalidArgument", err)
	}

	if err := svc.DeleteSecret(ctx, "u", "OPENAI_KEY"); !errs.Is(err, errs.NotFound) {
		t.Errorf("another team deleting it: %v, want NotFound", err)
	}
	if err := svc.DeleteSecret(ctx, team, "OPENAI_KEY"); err != nil {
		t.Fatal(err)
	}
	if list, next, err := svc.ListSecrets(ctx, team, "", 10); err != nil || len(list) != 0 || next != "" {
		t.Errorf("the list after the delete: %+v %q %v", list, next, err)
	}
}
