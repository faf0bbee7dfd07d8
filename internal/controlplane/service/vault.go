package service

import (
	"context"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/secrets"
)

// Vault reveals a team's secrets by name (network.Secrets): what the
// node's egress proxy asks for each request it transforms, so an updated
// secret counts from the next request on. It lives on the control plane's
// side, over its store: the node holds it without importing either.
type Vault struct {
	Store store.Store
	Key   *secrets.Key
}

// Reveal returns the current value of a team's secret (errs.NotFound).
func (v Vault) Reveal(ctx context.Context, team, name string) (string, error) {
	s, err := v.Store.TeamSecret(ctx, team, name)
	if err != nil {
		return "", err
	}
	return v.Key.Open(team, s.ID, s.Sealed)
}
