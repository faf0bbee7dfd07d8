package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// MaxBuildSteps caps a build's steps: each may add a layer, and a
// sandbox's root stacks them all.
const MaxBuildSteps = 128

// teamBudget is what a team's builds and snapshots in progress may still
// store: what its quota had left when the first of them started, shared
// by all of them (each build's layer charged as it is written or
// committed, each snapshot's size reserved before it is made), until the
// last one ends and what they kept counts as stored.
type teamBudget struct {
	budget *fsutil.Budget
	jobs   int
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
	tb := t.teamBudget(team, left)
	if tb.budget.Used() >= tb.budget.Max {
		t.endJob(team, tb)
		return nil, errs.New(errs.QuotaExceeded, "team quota: the team's builds and snapshots in progress use the %d MiB its storage quota leaves; wait for them to end", tb.budget.Max>>20)
	}
	spec.Budget, spec.StorageBytes = tb.budget, tb.budget.Left()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.endJob(team, tb)
	}, nil
}

// teamBudget is the budget of team's jobs in progress, made with what its
// quota leaves (left) for the first of them, counting one job more (t.mu
// held); endJob counts it out.
func (t *Templates) teamBudget(team string, left int64) *teamBudget {
	if t.budgets == nil {
		t.budgets = map[string]*teamBudget{}
	}
	tb := t.budgets[team]
	if tb == nil {
		tb = &teamBudget{budget: &fsutil.Budget{Max: left, What: "the team's storage quota"}}
		t.budgets[team] = tb
	}
	tb.jobs++
	return tb
}

// endJob counts one of a team's jobs out (t.mu held): after the last, what
// they kept counts as stored.
func (t *Templates) endJob(team string, tb *teamBudget) {
	if tb.jobs--; tb.jobs == 0 {
		delete(t.budgets, team)
	}
}

// StorageHold is storage a snapshot in progress reserved of what its
// team's quota leaves (ReserveStorage): Settle makes it the snapshot's
// real size, and End gives it back unless the snapshot was kept. A hold
// of a team without a quota holds nothing. It is kept in the team's
// budget here, or, where the store keeps holds (Templates.Holds: a
// cluster's database), there as id, for every replica to count.
type StorageHold struct {
	t    *Templates
	team string
	tb   *teamBudget
	id   string
	held int64
}

// holdTTL bounds a hold in the database that a replica never let go (it
// died mid-snapshot); holdTries is how often a hold is asked again while
// the templates' records change under it.
const (
	holdTTL   = time.Hour
	holdTries = 8
)

// ReserveStorage holds estimate bytes for a snapshot of team's, from what
// its storage quota leaves beside its builds and snapshots in progress,
// or refuses it (QuotaExceeded) with nothing held.
func (t *Templates) ReserveStorage(ctx context.Context, team string, estimate int64) (*StorageHold, error) {
	left, err := t.storageLeft(ctx, team)
	if err != nil || left == 0 {
		return &StorageHold{}, err
	}
	refused := func(free int64) error {
		return errs.New(errs.QuotaExceeded, "team quota: the snapshot would store about %s, and the team's storage quota leaves %s beside its builds and snapshots in progress; delete templates, snapshots or volumes to store more",
			mib(estimate), mib(max(free, 0)))
	}
	if t.Holds != nil {
		h := &StorageHold{t: t, team: team, id: ids.New("", 20)}
		if err := h.holdShared(ctx, estimate, refused); err != nil {
			return nil, err
		}
		return h, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	tb := t.teamBudget(team, left)
	if err := tb.budget.Reserve(estimate); err != nil {
		t.endJob(team, tb)
		return nil, refused(tb.budget.Max - tb.budget.Used())
	}
	return &StorageHold{t: t, team: team, tb: tb, held: estimate}, nil
}

// holdShared holds n bytes in the store's holds, or refuses them with
// refused(what is free) past what the quota leaves beside the team's
// other holds.
//
// The team's stored templates are counted before the database's lock is
// taken (counting reads the records through the store's own connection)
// at a generation of the records the hold then checks: a snapshot kept
// meanwhile, whose hold went, makes it count again.
func (h *StorageHold) holdShared(ctx context.Context, n int64, refused func(free int64) error) error {
	for try := 1; ; try++ {
		gen, err := h.t.store.Generation()
		if err != nil {
			return err
		}
		left, err := h.t.storageLeft(ctx, h.team)
		if err != nil {
			return err
		}
		err = h.t.Holds.HoldStorage(ctx, h.team, h.id, n, holdTTL, gen, func(held int64) error {
			if left > 0 && held+n > left {
				return refused(left - held)
			}
			return nil
		})
		if err == nil {
			h.held = n
		}
		if !errors.Is(err, store.ErrRecordsChanged) || try == holdTries {
			return err
		}
	}
}

// Settle makes the hold the snapshot's real size, or refuses a snapshot
// larger than what the team's quota leaves (QuotaExceeded), its hold kept
// until End.
func (h *StorageHold) Settle(ctx context.Context, size int64) error {
	refused := func(free int64) error {
		return errs.New(errs.QuotaExceeded, "team quota: the snapshot holds %s, more than the %s the team's storage quota leaves beside its builds and snapshots in progress; nothing of it is kept; delete templates, snapshots or volumes to store more",
			mib(size), mib(max(free, 0)))
	}
	if h.id != "" {
		return h.holdShared(ctx, size, refused)
	}
	if h.tb == nil {
		return nil
	}
	if more := size - h.held; more <= 0 {
		h.tb.budget.Refund(-more)
	} else if err := h.tb.budget.Reserve(more); err != nil {
		return refused(h.held + h.tb.budget.Max - h.tb.budget.Used())
	}
	h.held = size
	return nil
}

// End lets the hold go: kept, the snapshot's size stays charged here
// until the team's last job in progress ends (it is stored by then), or
// in the store's holds until its record counts (it does by now); else it
// is given back.
func (h *StorageHold) End(ctx context.Context, kept bool) {
	if h.id != "" {
		if err := h.t.Holds.ReleaseStorage(context.WithoutCancel(ctx), h.id); err != nil {
			h.t.log.Warn("let a snapshot's storage hold go", "team", h.team, logx.Err(err))
		}
		return
	}
	if h.tb == nil {
		return
	}
	if !kept {
		h.tb.budget.Refund(h.held)
	}
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	h.t.endJob(h.team, h.tb)
	h.tb = nil
}

// mib says n bytes in MiB, rounded up.
func mib(n int64) string { return fmt.Sprintf("%d MiB", (n+1<<20-1)>>20) }
