// Package service holds the control plane's use cases: create, list,
// inspect, time out and kill sandboxes for a team, keeping the store and
// the node in step.
package service

import (
	"cmp"
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/secrets"
	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/template"
)

// Node is where sandboxes run: the in-process node manager in `cove
// server`, the cluster's nodes (cluster.Cluster) in `cove api`.
type Node = sandboxes.Node

// Snapshots records snapshots as templates (template.Store).
type Snapshots interface {
	CreateSnapshot(name string, src template.SnapshotSource, layer template.LayerSum, procs *template.ProcessImage) (template.Record, error)
	ListSnapshots(team, sandboxID, name string) []template.Record
}

// Config configures the service.
type Config struct {
	Domain     string        // the sandbox domain reported to SDKs
	MaxTimeout time.Duration // the longest a sandbox may live
	// CanUseTemplate, when set, says whether a team may start sandboxes
	// from a template (Templates.CanUse).
	CanUseTemplate func(team, ref string) error
	// MetricsInterval is how often each sandbox's use is sampled for its
	// metric history (default 5 s); MetricsKept how many samples a
	// sandbox keeps (default 1440: two hours at 5 s).
	MetricsInterval time.Duration
	MetricsKept     int
	// Snapshots, when set, keeps sandboxes' snapshots (else they are
	// Unimplemented); ReserveStorage, when set, holds a snapshot's size
	// of what its team's storage quota leaves, or refuses it
	// (Templates.ReserveStorage).
	Snapshots      Snapshots
	ReserveStorage func(ctx context.Context, team string, estimate int64) (*StorageHold, error)
	// TeamQuota is every team's quota but where a team's record sets its
	// own (TeamQuota). The node admits a create against it; where the
	// store admits too (store.Admitting: a cluster's PostgreSQL), it caps
	// what each team's sandboxes hold together over every node. A create
	// past it is QuotaExceeded, nothing left.
	TeamQuota sandboxes.TeamQuota
	// WebhookAllow are ranges webhooks may be sent to although they are
	// loopback, private or the host's (an operator's opt-in).
	WebhookAllow []netip.Prefix
	// SandboxRanges, when set, are the nodes' sandbox address ranges
	// (besides network.DefaultRange), which no webhook is sent to.
	SandboxRanges func() []netip.Prefix
	// NodeAddrs, when set, are the cluster's nodes' own addresses, which
	// no webhook is sent to unless WebhookAllow lists them.
	NodeAddrs func() []netip.Addr
	// SecretsKey seals teams' secrets (internal/secrets); without it the
	// secrets API and rules that name a secret are Unimplemented.
	SecretsKey *secrets.Key
	// Identity is the issuer of sandboxes' workload tokens, whose keys the
	// API publishes (nil: none, iam is refused by the nodes).
	Identity *svid.Issuer
	// Now is the clock of the records kept for a time (idempotency keys,
	// the pruning of events); nil is time.Now.
	Now func() time.Time
}

// Service implements the use cases.
type Service struct {
	cfg    Config
	store  store.Store
	node   Node
	secret []byte
	log    *slog.Logger

	mu      sync.Mutex
	history map[string]*history // metric samples per sandbox
	teams   *teamMetrics        // each team's concurrent sandboxes and start rate
	quotas  quotaCache          // teams' quotas as last read (TeamQuota)

	webhooks *webhookSender
}

// New returns the service; secret derives sandbox tokens.
func New(cfg Config, st store.Store, n Node, secret []byte, log *slog.Logger) *Service {
	if cfg.MaxTimeout == 0 {
		cfg.MaxTimeout = 24 * time.Hour
	}
	if cfg.MetricsInterval <= 0 {
		cfg.MetricsInterval = 5 * time.Second
	}
	if cfg.MetricsKept <= 0 {
		cfg.MetricsKept = 1440
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{cfg: cfg, store: st, node: n, secret: secret, log: log, history: map[string]*history{}, teams: newTeamMetrics(),
		quotas: quotaCache{read: map[string]cachedQuota{}}}
	s.webhooks = s.newWebhookSender()
	return s
}

// now is the time by the service's clock (Config.Now).
func (s *Service) now() time.Time { return s.cfg.Now() }

// Ended forgets a sandbox that ended on the node (timeout, crash, kill)
// and logs why, unless a kill through the API forgot it first. Of the
// replicas that each hear of the end, the one whose delete removed the
// record logs it.
func (s *Service) Ended(id string, exit isolation.Exit) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := s.store.Sandbox(ctx, id)
	if err == nil {
		deleted, err := s.store.DeleteSandbox(ctx, id)
		switch {
		case err != nil:
			s.log.Error("forget ended sandbox", logx.SandboxID(id), logx.Err(err))
		case deleted && exit.Detail == sandboxes.KilledDetail:
			s.logLine(ctx, sb.Team, id, "info", "sandbox killed", nil, event(sb, store.EventKilled, store.ReasonAPI))
		case deleted:
			level := "info"
			if exit.Reason == isolation.ExitOOM || exit.Reason == isolation.ExitCrashed {
				level = "error"
			}
			s.logLine(ctx, sb.Team, id, level, "sandbox ended", map[string]string{"reason": string(exit.Reason), "detail": exit.Detail},
				event(sb, store.EventKilled, endReason(exit)))
		}
	} else if !errs.Is(err, errs.NotFound) {
		s.log.Error("forget ended sandbox", logx.SandboxID(id), logx.Err(err))
	}
	s.mu.Lock()
	delete(s.history, id)
	s.mu.Unlock()
}

// StateChanged records a pause or resume the node made itself (a timeout
// with auto-pause, traffic with auto-resume).
func (s *Service) StateChanged(info sandboxes.Info) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := s.store.Sandbox(ctx, info.ID)
	if err != nil {
		s.log.Error("record a sandbox's state", logx.SandboxID(info.ID), logx.Err(err))
		return
	}
	if err := s.store.SetSandboxState(ctx, info.ID, info.State, info.EndAt); err != nil {
		s.log.Error("record a sandbox's state", logx.SandboxID(info.ID), logx.Err(err))
		return
	}
	if sb.State != info.State { // another replica's news, else
		msg := map[sandboxes.State]string{sandboxes.StatePaused: "sandbox paused at its timeout", sandboxes.StateRunning: "sandbox resumed by traffic"}[info.State]
		typ, reason := store.EventResumed, store.ReasonTraffic
		if info.State == sandboxes.StatePaused {
			typ, reason = store.EventPaused, store.ReasonAutoPause
		}
		s.logLine(ctx, sb.Team, info.ID, "info", cmp.Or(msg, "sandbox "+string(info.State)), nil, event(sb, typ, reason))
	}
}

// Reconcile makes the store and the node agree after a start: records of
// sandboxes the node no longer runs are dropped, sandboxes the node runs
// without a record (a crash between the two) are killed.
func (s *Service) Reconcile(ctx context.Context) error {
	ids, err := s.store.AllSandboxIDs(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, id := range ids {
		recorded[id] = true
		if _, err := s.node.Get(ctx, id); errs.Is(err, errs.NotFound) {
			if _, err := s.store.DeleteSandbox(ctx, id); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	running, err := s.node.List(ctx)
	if err != nil {
		return err
	}
	for _, info := range running {
		if !recorded[info.ID] {
			if err := s.node.Kill(ctx, info.ID); err != nil {
				s.log.Error("kill unrecorded sandbox", logx.SandboxID(info.ID), logx.Err(err))
			}
		}
	}
	return nil
}
