package secrets

import (
	"context"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// Vault reveals a team's secrets by name: what the egress proxy asks for
// each request it transforms, so an updated secret counts from the next
// request on.
type Vault struct {
	Store store.Store
	Key   *Key
}

// Reveal returns the current value of a team's secret (errs.NotFound).
func (v Vault) Reveal(ctx context.Context, team, name string) (string, error) {
	s, err := v.Store.TeamSecret(ctx, team, name)
	if err != nil {
		return "", err
	}
	return v.Key.Open(team, s.ID, s.Sealed)
}
