package service

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Teams and their API keys: what `cove team`, `cove key`, the key API and
// the dashboard do, over one store.

var teamName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// CreateTeam records a team named name, under an id of its own (a team
// made later under a deleted one's name inherits nothing of it).
func CreateTeam(ctx context.Context, st store.Store, name string, quota store.TeamQuota) (store.Team, error) {
	if !teamName.MatchString(name) {
		return store.Team{}, errs.New(errs.InvalidArgument, "team name %q: 1 to 63 of a-z, 0-9, - and _, starting with a letter or digit", name)
	}
	if err := CheckQuota(quota); err != nil {
		return store.Team{}, err
	}
	t := store.Team{ID: ids.UUID(), Name: name, CreatedAt: time.Now().UTC().Truncate(time.Second), Quota: quota.Apply(store.Quota{})}
	return t, st.AddTeam(ctx, t)
}

// CheckQuota refuses a negative quota (0 is the server's).
func CheckQuota(q store.TeamQuota) error {
	for _, v := range []*int{q.MaxSandboxes, q.MaxCPUs} {
		if v != nil && *v < 0 {
			return errs.New(errs.InvalidArgument, "a team's quotas are 0 (the server's) or more")
		}
	}
	for _, v := range []*int64{q.MaxMemoryMB, q.MaxDiskMB, q.MaxStorageMB} {
		if v != nil && *v < 0 {
			return errs.New(errs.InvalidArgument, "a team's quotas are 0 (the server's) or more")
		}
	}
	return nil
}

// MaxTeamAPIKeys caps a team's API keys.
const MaxTeamAPIKeys = 100

// CreateKey makes an API key for a team (by id or name) and returns it:
// the only time it is shown; the store keeps its hash and its mask.
func CreateKey(ctx context.Context, st store.Store, team, name string) (string, store.APIKey, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return "", store.APIKey{}, errs.New(errs.InvalidArgument, "a key's name is 1 to 100 characters")
	}
	t, err := st.Team(ctx, team)
	if err != nil {
		return "", store.APIKey{}, err
	}
	if have, err := st.TeamAPIKeys(ctx, t.ID); err != nil {
		return "", store.APIKey{}, err
	} else if len(have) >= MaxTeamAPIKeys {
		return "", store.APIKey{}, errs.New(errs.QuotaExceeded, "team quota: the team has %d API keys, at most %d: delete one first", len(have), MaxTeamAPIKeys)
	}
	raw := auth.NewAPIKey()
	k := store.APIKey{Hash: auth.HashAPIKey(raw), Team: t.ID, Name: name, CreatedAt: time.Now().UTC().Truncate(time.Second), Mask: auth.Mask(raw)}
	if err := st.AddAPIKey(ctx, k); err != nil {
		return "", store.APIKey{}, err
	}
	return raw, k, nil
}

// TeamKey finds a team's key by its id (store.APIKey.ID) or hash; another
// team's is not found.
func TeamKey(ctx context.Context, st store.Store, team, id string) (store.APIKey, error) {
	keys, err := st.TeamAPIKeys(ctx, team)
	if err != nil {
		return store.APIKey{}, err
	}
	for _, k := range keys {
		if id != "" && (k.ID() == id || k.Hash == id) {
			return k, nil
		}
	}
	return store.APIKey{}, errs.New(errs.NotFound, "API key %s not found", id)
}

// RevokeKey deletes a team's key by id or hash. A team's last key is not
// revoked: the answer says to make another first, or delete the team.
func RevokeKey(ctx context.Context, st store.Store, team, id string) (store.APIKey, error) {
	k, err := TeamKey(ctx, st, team, id)
	if err != nil {
		return k, err
	}
	keys, err := st.TeamAPIKeys(ctx, team)
	if err != nil {
		return k, err
	}
	if len(keys) == 1 {
		return k, errs.New(errs.Conflict, "%s is the last API key of team %s: create another first (cove key create --team %s), or delete the team (cove team delete %s)",
			k.ID(), team, team, team)
	}
	return k, st.DeleteAPIKey(ctx, team, k.Hash)
}

// quotaTTL is how long a team's quota is taken as read: a create reads
// it from the store at most this often a team (`cove team set` takes
// effect within it).
const quotaTTL = 5 * time.Second

// quotaCache keeps teams' quotas as last read.
type quotaCache struct {
	mu   sync.Mutex
	read map[string]cachedQuota
}

type cachedQuota struct {
	q  sandboxes.TeamQuota
	at time.Time
}

// TeamQuota is a team's quota: the server's, with what the team's record
// sets instead (each field above 0), read at most every quotaTTL.
func (s *Service) TeamQuota(ctx context.Context, team string) (sandboxes.TeamQuota, error) {
	now := time.Now()
	s.quotas.mu.Lock()
	c, ok := s.quotas.read[team]
	s.quotas.mu.Unlock()
	if ok && now.Sub(c.at) < quotaTTL {
		return c.q, nil
	}
	q := s.cfg.TeamQuota
	t, err := s.store.Team(ctx, team)
	switch {
	case errs.Is(err, errs.NotFound): // a team that only its keys named (before teams were kept)
	case err != nil:
		return q, err
	default:
		own := t.Quota
		for _, f := range []struct {
			to   *int64
			from int64
		}{{&q.MemoryMB, own.MaxMemoryMB}, {&q.DiskMB, own.MaxDiskMB}, {&q.StorageMB, own.MaxStorageMB}} {
			if f.from > 0 {
				*f.to = f.from
			}
		}
		if own.MaxSandboxes > 0 {
			q.Sandboxes = own.MaxSandboxes
		}
		if own.MaxCPUs > 0 {
			q.CPUs = own.MaxCPUs
		}
	}
	s.quotas.mu.Lock()
	s.quotas.read[team] = cachedQuota{q, now}
	s.quotas.mu.Unlock()
	return q, nil
}
