package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/cluster"
	"github.com/covesandbox/cove/internal/controlplane/httpapi"
	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/dashboard"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/proxy"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
)

// RunAPI runs an API replica of a cluster (cove api): the E2B API and the
// sandbox proxy on cfg.Listen, its state in the cluster's database, its
// sandboxes on the nodes that heartbeat there. Replicas share nothing
// else: any number may run, and any may stop at any moment.
func RunAPI(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := checkBase(cfg.Base); err != nil {
		return err
	}
	raiseFileLimit(log)
	var err error
	if cfg.Descriptors, err = descriptorBudget(cfg.Descriptors, log); err != nil {
		return err
	}
	st, secret, done, err := joinCluster(ctx, "cove api", cfg, false, log)
	if err != nil {
		return err
	}
	defer done()
	if cfg, err = setupKeys(ctx, st, cfg); err != nil {
		return err
	}
	// The templates, shared with the nodes; built by them when they share
	// an object store.
	templates, bucket, err := clusterTemplates(ctx, cfg, st, "", log)
	if err != nil {
		return err
	}
	var svc *service.Service // set before the cluster runs
	_, clientTLS, err := nodeTLS(cfg)
	if err != nil {
		return err
	}
	nodes := cluster.New(cluster.Config{Token: cfg.NodeToken, Lease: cfg.NodeLease, TLS: clientTLS,
		TemplateID:   templates.IDOf,
		Ended:        func(id string, exit isolation.Exit) { svc.Ended(id, exit) },
		StateChanged: func(info sandboxes.Info) { svc.StateChanged(info) },
	}, st, st, log)
	var builder service.Builder
	if bucket != nil {
		builder = nodes.Builder(templates.BuiltOn)
	}
	tpls := service.NewTemplates(ctx, templates, builder, func() map[string]bool { return nil }, secret, log)
	tpls.UseSharedLogs(st) // the nodes write them there
	ln, err := listen(&cfg)
	if err != nil {
		return err
	}
	defer ln.Close()
	key, err := secretsKey(cfg, false)
	if err != nil {
		return err
	}
	issuer, err := identityIssuer(cfg, false)
	if err != nil {
		return err
	}
	scfg := service.Config{Domain: cfg.Domain, CanUseTemplate: tpls.CanUse, MetricsInterval: cfg.MetricsInterval, TeamQuota: cfg.Admission.Team, SecretsKey: key, WebhookAllow: cfg.WebhookAllow,
		Identity: issuer, SandboxRanges: nodes.SandboxRanges, NodeAddrs: watchNodes(ctx, st, log).Addrs}
	if bucket != nil { // kept where every node reaches them
		scfg.Snapshots, scfg.ReserveStorage = templates, tpls.ReserveStorage
	}
	svc = service.New(scfg, st, nodes, secret, log)
	tpls.Quotas = svc.TeamQuota
	tpls.Holds = st // snapshots through every replica count in their team's quota
	vols := nodes.Volumes(st)
	volumes := service.NewVolumes(vols, secret)
	volumes.CheckStorage, tpls.VolumeBytes = tpls.CheckStorage, volumes.TeamBytes
	if err := nodes.Refresh(ctx); err != nil {
		return fmt.Errorf("read the cluster's nodes: %w", err)
	}
	running, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go nodes.Run(running)
	go svc.RunSampler(running)
	go svc.PruneLogs(running)
	go svc.PruneEvents(running, cfg.EventsKept)
	go svc.RunWebhooks(running)
	if bucket != nil {
		go collectBucket(running, templates, nodes, log)
	}
	if cfg.Base == BaseDebian {
		startBase(running, templates, tpls, clusterPool{nodes}, log)
	}
	api := httpapi.New(svc, tpls, volumes, vols.Files, st, log)
	api.AdminToken = cfg.AdminToken
	reg, err := openMetrics(ctx, cfg, log)
	if err != nil {
		return err
	}
	dash, err := dashboard.New(ctx, dashboard.Config{Store: st, API: api, Log: log, CanSee: tpls.Visible, AdminToken: cfg.AdminToken, Nodes: func(ctx context.Context) ([]dashboard.NodeStatus, error) {
		members, err := st.Members(ctx)
		out := make([]dashboard.NodeStatus, len(members))
		for i, m := range members {
			out[i] = dashboard.NodeStatus{ID: m.ID, Node: m.ID, Drivers: m.Drivers, CPUs: m.CPUs, MemoryMB: m.MemoryMB, CommittedCPUMillis: m.CommittedCPUMillis,
				CommittedMemoryMB: m.CommittedMemoryMB, Sandboxes: m.Sandboxes, Warm: m.Warm, HeartbeatAge: m.Age.Seconds()}
		}
		return out, err
	}})
	if err != nil {
		return err
	}
	return serve(ctx, cfg, ln, api, dash, proxy.New(nodes, svc, cfg.Domain, log), httpMetrics(reg), "cove api", log)
}

// Archives in the object store that no record names are deleted an hour
// after they were written at the earliest (younger ones may be a build's
// or a snapshot's on its way to its record), build files after a day; a
// replica looks every hour.
const (
	bucketSweepEvery = time.Hour
	bucketBlobAge    = time.Hour
	bucketFilesAge   = 24 * time.Hour
)

// collectBucket sweeps the object store every bucketSweepEvery until ctx
// ends; what paused sandboxes' states name stays.
func collectBucket(ctx context.Context, templates *template.Store, nodes *cluster.Cluster, log *slog.Logger) {
	t := time.NewTicker(bucketSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		keep, err := nodes.PausedBlobs(ctx)
		if err != nil {
			log.Warn("collect the object store: the paused states", logx.Err(err))
			continue
		}
		n, err := templates.CollectRemote(ctx, bucketBlobAge, bucketFilesAge, keep)
		if err != nil && ctx.Err() == nil {
			log.Warn("collect the object store", logx.Err(err))
		} else if n > 0 {
			log.Info("object store collected", "removed", n)
		}
	}
}
