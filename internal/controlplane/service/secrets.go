package service

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/secrets"
)

// MaxSecretsPage bounds a page of ListSecrets.
const MaxSecretsPage = 1000

// MaxTeamSecrets caps a team's secrets (E2B's 50 live secrets).
const MaxTeamSecrets = 50

// NewSecret is a secret as a team creates it.
type NewSecret struct {
	Name, Value string
	Metadata    map[string]string
}

func (s *Service) secretsKey() (*secrets.Key, error) {
	if s.cfg.SecretsKey == nil {
		return nil, errs.New(errs.Unimplemented, "this deployment keeps no secrets: its operator gave no secrets key (--secrets-key-file)")
	}
	return s.cfg.SecretsKey, nil
}

// CreateSecret stores a team's new secret, its value sealed; what it
// returns holds no value.
func (s *Service) CreateSecret(ctx context.Context, team string, n NewSecret) (store.TeamSecret, error) {
	key, err := s.secretsKey()
	if err != nil {
		return store.TeamSecret{}, err
	}
	name, err := secrets.Name(n.Name)
	if err != nil {
		return store.TeamSecret{}, err
	}
	if err := secrets.Value(n.Value); err != nil {
		return store.TeamSecret{}, err
	}
	if err := secrets.Metadata(n.Metadata); err != nil {
		return store.TeamSecret{}, err
	}
	if n.Metadata == nil {
		n.Metadata = map[string]string{}
	}
	if have, err := s.store.TeamSecrets(ctx, team, "", MaxTeamSecrets); err != nil {
		return store.TeamSecret{}, err
	} else if len(have) >= MaxTeamSecrets {
		return store.TeamSecret{}, errs.Final(errs.New(errs.Conflict, "the team has %d secrets, at most %d: delete one first", len(have), MaxTeamSecrets), errs.CodeSecretLimit)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	id := ids.New(secrets.IDPrefix, 20)
	sec := store.TeamSecret{ID: id, Team: team, Name: name, Version: 1, Metadata: n.Metadata,
		Sealed: key.Seal(team, id, n.Value), CreatedAt: now, UpdatedAt: now}
	if err := s.store.AddTeamSecret(ctx, sec); err != nil {
		return store.TeamSecret{}, err
	}
	return withoutValue(sec), nil
}

// UpdateSecret stores a new value as the secret's next version, and new
// metadata unless nil.
func (s *Service) UpdateSecret(ctx context.Context, team, ref, value string, metadata map[string]string) (store.TeamSecret, error) {
	key, err := s.secretsKey()
	if err != nil {
		return store.TeamSecret{}, err
	}
	if err := secrets.Value(value); err != nil {
		return store.TeamSecret{}, err
	}
	if err := secrets.Metadata(metadata); err != nil {
		return store.TeamSecret{}, err
	}
	cur, err := s.Secret(ctx, team, ref)
	if err != nil {
		return store.TeamSecret{}, err
	}
	sec, err := s.store.UpdateTeamSecret(ctx, team, cur.ID, key.Seal(team, cur.ID, value), metadata, time.Now().UTC().Truncate(time.Millisecond))
	return withoutValue(sec), err
}

// Secret finds a team's secret by id or name (a name in any case).
func (s *Service) Secret(ctx context.Context, team, ref string) (store.TeamSecret, error) {
	if _, err := s.secretsKey(); err != nil {
		return store.TeamSecret{}, err
	}
	sec, err := s.store.TeamSecret(ctx, team, ref)
	if errs.Is(err, errs.NotFound) {
		if name, nerr := secrets.Name(ref); nerr == nil && name != ref {
			sec, err = s.store.TeamSecret(ctx, team, name)
		}
	}
	return withoutValue(sec), err
}

// ListSecrets returns a page of a team's secrets by name, after the name
// after, and the name to list from next ("" at the end).
func (s *Service) ListSecrets(ctx context.Context, team, after string, limit int) ([]store.TeamSecret, string, error) {
	if _, err := s.secretsKey(); err != nil {
		return nil, "", err
	}
	if limit <= 0 || limit > MaxSecretsPage {
		return nil, "", errs.New(errs.InvalidArgument, "limit: 1 to %d", MaxSecretsPage)
	}
	page, err := s.store.TeamSecrets(ctx, team, after, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(page) > limit {
		page = page[:limit]
		next = page[limit-1].Name
	}
	for i := range page {
		page[i] = withoutValue(page[i])
	}
	return page, next, nil
}

// DeleteSecret removes a team's secret and every version of it.
func (s *Service) DeleteSecret(ctx context.Context, team, ref string) error {
	sec, err := s.Secret(ctx, team, ref)
	if err != nil {
		return err
	}
	return s.store.DeleteTeamSecret(ctx, team, sec.ID)
}

// checkSecretRefs checks that every secret the header values name is one
// of the team's.
func (s *Service) checkSecretRefs(ctx context.Context, team string, values []string) error {
	for _, v := range values {
		names, _, err := secrets.Refs(v)
		if err != nil {
			return err
		}
		for _, name := range names {
			if _, err := s.Secret(ctx, team, name); err != nil {
				if errs.Is(err, errs.NotFound) {
					return errs.New(errs.InvalidArgument, "network rules name the secret %q, which this team does not have", name)
				}
				return err
			}
		}
	}
	return nil
}

func withoutValue(s store.TeamSecret) store.TeamSecret {
	s.Sealed = nil
	return s
}
