package service

import (
	"context"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/template"
)

// MaxBuildSteps caps a build's steps: each may add a layer, and a
// sandbox's root stacks them all.
const MaxBuildSteps = 128

// teamBudget is what a team's builds in progress may still store: what
// its quota had left when the first of them started, shared by all of
// them (each layer charged as it is written or committed), until the last
// one ends and its layers count as stored.
type teamBudget struct {
	budget *fsutil.Budget
	builds int
}

// storageLimit is a team's storage quota in MiB (0: none).
func (t *Templates) storageLimit(ctx context.Context, team string) (int64, error) {
	if t.Quotas == nil {
		return t.MaxTeamStorageMB, nil
	}
	q, err := t.Quotas(ctx, team)
	return q.StorageMB, err
}

// CheckStorage refuses a build or a snapshot to a team whose templates'
// layers already fill its storage quota.
func (t *Templates) CheckStorage(ctx context.Context, team string) error {
	_, err := t.storageLeft(ctx, team)
	return err
}

// storageLeft is what a team's quota leaves of its storage (0: no quota),
// QuotaExceeded when nothing.
func (t *Templates) storageLeft(ctx context.Context, team string) (int64, error) {
	limit, err := t.storageLimit(ctx, team)
	if err != nil || limit <= 0 {
		return 0, err
	}
	layers, err := t.store.TeamLayerBytes(team)
	if err != nil {
		return 0, err
	}
	files, err := t.store.TeamFilesBytes(team)
	if err != nil {
		return 0, err
	}
	var vols int64
	if t.VolumeBytes != nil {
		if vols, err = t.VolumeBytes(ctx, team); err != nil {
			return 0, err
		}
	}
	logs, err := t.TeamLogBytes(ctx, team)
	if err != nil {
		return 0, err
	}
	if used := layers + files + vols + logs; used >= limit<<20 {
		return 0, errs.New(errs.QuotaExceeded, "team quota: the team's templates hold %d MiB of layers and %d MiB of build logs, its uploads for COPY steps %d MiB and its volumes %d MiB, at most %d MiB together; delete templates or volumes to store more (uploads not used for a day go)", layers>>20, logs>>20, files>>20, vols>>20, limit)
	}
	return limit<<20 - layers - files - vols - logs, nil
}

// TeamLogBytes is what the logs of a team's builds hold in the database
// (each entry its message and template.LogEntryOverhead): charged to its
// storage, and deleted with their templates.
func (t *Templates) TeamLogBytes(ctx context.Context, team string) (int64, error) {
	logs := t.logStore()
	if logs == nil {
		return 0, nil
	}
	var ids []string
	for _, r := range t.store.List(team) {
		if r.Team == team {
			ids = append(ids, buildIDs(r)...)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return logs.BuildLogBytes(ctx, ids)
}

// reserveStorage gives a build the team's storage budget (spec.Budget,
// and what is left of it as spec.StorageBytes for a cluster's node), or
// refuses it when the team's stored layers and its builds in progress
// leave nothing; release gives the build's share back once it ended.
func (t *Templates) reserveStorage(ctx context.Context, team string, spec *template.Spec) (release func(), err error) {
	left, err := t.storageLeft(ctx, team)
	if err != nil || left == 0 {
		return func() {}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.budgets == nil {
		t.budgets = map[string]*teamBudget{}
	}
	tb := t.budgets[team]
	if tb == nil {
		tb = &teamBudget{budget: &fsutil.Budget{Max: left, What: "the team's storage quota"}}
		t.budgets[team] = tb
	}
	if tb.budget.Used() >= tb.budget.Max {
		return nil, errs.New(errs.QuotaExceeded, "team quota: the team's builds in progress use the %d MiB its storage quota leaves; wait for them to end", tb.budget.Max>>20)
	}
	tb.builds++
	spec.Budget, spec.StorageBytes = tb.budget, tb.budget.Left()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if tb.builds--; tb.builds == 0 {
			delete(t.budgets, team)
		}
	}, nil
}
