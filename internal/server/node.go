package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/covesandbox/cove/internal/connguard"
	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/httpapi"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/metrics"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/nodeapi"
	"github.com/covesandbox/cove/internal/objstore"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/volume"
)

// heartbeatEvery is how often a node reports itself to its cluster.
const heartbeatEvery = time.Second

// RunNode runs a node of a cluster (cove node): this host's sandboxes,
// served to the API replicas over the node API on cfg.Listen, its
// heartbeat in the cluster's database. It serves until ctx ends; running
// sandboxes keep running and are adopted by the next start (an API
// replica takes the node for lost after NodeLease without a heartbeat).
func RunNode(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := checkBase(cfg.Base); err != nil {
		return err
	}
	if cfg.NodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return err
		}
		cfg.NodeName = host
	}
	st, secret, done, err := joinCluster(ctx, "cove node", cfg, true, log)
	if err != nil {
		return err
	}
	defer done()
	if cfg.Descriptors, err = descriptorBudget(cfg.Descriptors, log); err != nil {
		return err
	}
	templates, bucket, err := clusterTemplates(ctx, cfg, st, cfg.NodeName, log)
	if err != nil {
		return err
	}
	cfg.LXCFS = startLXCFS(ctx, cfg.LXCFS, log)
	drivers, err := openDrivers(cfg, log)
	if err != nil {
		return err
	}
	defer drivers.Close()
	var api *nodeapi.Server // set before any sandbox runs (Recover)
	var mgr *node.Manager   // likewise
	nodeCfg := node.Config{
		Drivers: drivers.more, Unavailable: drivers.unavailable,
		Dir: filepath.Join(cfg.DataDir, "node"), PoolSize: cfg.PoolSize, ColdTemplates: cfg.PoolSkip, SpillAfter: cfg.PauseToDiskAfter, Admission: cfg.Admission,
		Secret:  secret,
		OnState: func(info sandboxes.Info) { api.StateChanged(info) },
		OnEnd: func(info sandboxes.Info) {
			api.Ended(info)
			// The layers of templates deleted (by any replica) go once their
			// last sandbox here ended; the records are read: not inline.
			go templates.Tidy(mgr.LayersInUse)
		},
	}
	if bucket != nil { // a sandbox paused without its memory outlives the node
		nodeCfg.Share = templates.PushLayers
	}
	key, err := secretsKey(cfg, false)
	if err != nil {
		return err
	}
	issuer, err := identityIssuer(cfg, false)
	if err != nil {
		return err
	}
	nodes := watchNodes(ctx, st, log) // what no request for a tenant reaches
	if cfg.Network != nil {
		cfg.Network.Nodes = nodes.Addrs
	}
	nets, err := openNetworks(cfg, st, key, log)
	if err != nil {
		return err
	}
	if nets != nil {
		nets.SetIdentity(issuer)
		nodeCfg.Networks = nets
		defer nets.Close()
	}
	var vols *volume.Store
	var observed *metrics.Node
	if mgr, vols, _, observed, err = newNode(ctx, cfg, nodeCfg, drivers.def, templates, log); err != nil {
		return err
	}
	defer mgr.Close()
	if api, err = nodeapi.NewServer(mgr, cfg.NodeToken, log); err != nil {
		return err
	}
	api.ServeLayers(templates)
	api.ServeVolumes(vols, httpapi.NewVolumeFiles(vols.Locate, log))
	if bucket != nil { // what it builds, the other nodes can fetch
		builder := template.NewBuilder(templates, mgr, log)
		builder.AllowLocalImages, builder.Debootstrap, builder.Mirror, builder.Observe = cfg.LocalImages, cfg.Debootstrap, cfg.DebianMirror, observed.Built
		builder.Registries = registryPolicy(cfg, nodes)
		api.ServeBuilds(builder, st)
	}
	if _, _, err := mgr.Recover(ctx); err != nil {
		return fmt.Errorf("recover sandboxes: %w", err)
	}
	if err := killUnrecorded(ctx, st, cfg.NodeName, mgr, 0, log); err != nil {
		return err
	}
	if err := mgr.Warm(ctx, template.BaseName); err != nil {
		return fmt.Errorf("warm sandboxes: %w", err)
	}
	if cfg.Base == BaseDebian { // the API replicas build it
		handOverBase(ctx, templates, warmer(mgr, cfg.PoolSize), log)
	}
	serverTLS, _, err := nodeTLS(cfg)
	if err != nil {
		return err
	}
	// The node API's connections count against a guard until they present
	// the node token; a failed accept is retried.
	guard, err := connguard.New(cfg.Unauthenticated, cfg.Descriptors, log)
	if err != nil {
		return err
	}
	raw, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer raw.Close()
	var ln net.Listener = guard.Listen(raw)
	scheme, handler := "http://", api.Handler()
	if serverTLS != nil {
		scheme, handler = "https://", requireClientCert(handler)
		ln = tls.NewListener(ln, serverTLS)
	}
	me := store.Member{ID: cfg.NodeName, URL: cmp.Or(cfg.NodeURL, scheme+ln.Addr().String())}
	if cfg.Network != nil {
		me.SandboxRange = cmp.Or(cfg.Network.Range, network.DefaultRange).String()
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)} // a refused handshake, say
	guard.Serve(srv)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	beats, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBeats()
	go heartbeat(beats, st, me, mgr, templates, log)
	go sweep(beats, st, cfg.NodeName, mgr, vols, log)
	log.Info("cove node listening", "addr", ln.Addr().String(), "node", me.ID, "url", me.URL, "data", cfg.DataDir)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	stopPreparing, err := prepareDrivers(ctx, cfg, drivers, mgr, log)
	if err != nil {
		return err
	}
	defer stopPreparing()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopBeats()
	api.Close() // the replicas' event streams would hold the shutdown
	log.Info("shutting down; sandboxes keep running and are adopted on the next start")
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// joinCluster checks a cluster role's settings, takes its data directory
// (hardening the host where sandboxes run) and opens the cluster's
// database and the secret sandbox tokens derive from; done releases them.
func joinCluster(ctx context.Context, role string, cfg Config, sandboxes bool, log *slog.Logger) (st *postgres.Store, secret []byte, done func(), err error) {
	if cfg.Database == "" || cfg.NodeToken == "" {
		return nil, nil, nil, fmt.Errorf("%s needs the cluster's database (--database) and node token (--node-token)", role)
	}
	unlock, err := prepare(cfg.DataDir, sandboxes, log)
	if err != nil {
		return nil, nil, nil, err
	}
	if st, err = postgres.Open(ctx, cfg.Database); err != nil {
		unlock()
		return nil, nil, nil, err
	}
	done = func() { st.Close(); unlock() }
	if secret, err = st.Secret(ctx, "envd-token", auth.NewSecret); err != nil {
		done()
		return nil, nil, nil, err
	}
	return st, secret, done, nil
}

// clusterTemplates opens a cluster role's template store: its records in
// the cluster's database, its layers shared through the object store when
// there is one (bucket nil otherwise). node names the node (api: "").
func clusterTemplates(ctx context.Context, cfg Config, st *postgres.Store, node string, log *slog.Logger) (*template.Store, *objstore.Bucket, error) {
	templates, err := template.NewStore(filepath.Join(cfg.DataDir, "templates"), log)
	if err != nil {
		return nil, nil, fmt.Errorf("prepare templates: %w", err)
	}
	if err := templates.UseRecords(ctx, st, node); err != nil {
		return nil, nil, err
	}
	if cfg.ObjectStore == "" {
		return templates, nil, nil
	}
	bucket, err := objstore.Open(ctx, cfg.ObjectStore, cfg.ObjectStoreCredentials)
	if err != nil {
		return nil, nil, err
	}
	templates.UseRemote(bucket)
	return templates, bucket, nil
}

// heartbeat reports the node to its cluster every heartbeatEvery until
// ctx ends: its address, drivers, load, and what it holds of templates
// (warm sandboxes, cached layers).
func heartbeat(ctx context.Context, st store.Members, me store.Member, mgr *node.Manager, templates *template.Store, log *slog.Logger) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		l := mgr.Load()
		me.Drivers = mgr.Isolations()
		me.CPUs, me.MemoryMB, me.CommittedCPUMillis, me.CommittedMemoryMB, me.Sandboxes = l.CPUs, l.MemoryMB, l.CommittedCPUMillis, l.CommittedMemoryMB, l.Sandboxes
		me.Warm, me.Cached = l.Warm, templates.Cached()
		beat, cancel := context.WithTimeout(ctx, heartbeatEvery)
		if err := st.Heartbeat(beat, me); err != nil && ctx.Err() == nil {
			log.Warn("heartbeat", logx.Err(err))
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Every sweepEvery a node looks for what it holds that no record names:
// sandboxes and volumes; one younger than orphanAge may be a create's on
// its way to its record. (Tests shorten both.)
var (
	sweepEvery = 5 * time.Minute
	orphanAge  = time.Minute
)

// sweep removes, at once and every sweepEvery until ctx ends, what the
// node holds that no record names: sandboxes a replica failed to record,
// or whose record went while the node did not answer; volumes deleted
// while it was away, or made for a replica that died before it recorded
// them. A volume recorded under another node's name stays (the node was
// renamed: its volumes come back with its old name).
func sweep(ctx context.Context, st *postgres.Store, name string, mgr *node.Manager, vols *volume.Store, log *slog.Logger) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		if err := killUnrecorded(ctx, st, name, mgr, orphanAge, log); err != nil && ctx.Err() == nil {
			log.Warn("sweep sandboxes", logx.Err(err))
		}
		for _, v := range vols.All() {
			if time.Since(v.CreatedAt) < orphanAge {
				continue
			}
			_, err := st.VolumeByID(ctx, v.ID)
			if errs.Is(err, errs.NotFound) {
				log.Info("removing a volume no record names", "volume", v.ID, "name", v.Name)
				err = vols.DeleteByID(v.ID)
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("sweep volumes", "volume", v.ID, logx.Err(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// killUnrecorded ends the sandboxes the node runs that no API replica
// has a record of on this node: the cluster forgot them (or another node
// took them over) while the node was away, or a replica failed between
// the create and its record. At the start (minAge 0) every one goes,
// builds' too (they died with the node's last process); later only those
// older than minAge, builds aside.
func killUnrecorded(ctx context.Context, st store.Members, name string, mgr *node.Manager, minAge time.Duration, log *slog.Logger) error {
	recorded, err := st.SandboxesOn(ctx, name)
	if err != nil {
		return err
	}
	running, err := mgr.List(ctx)
	if err != nil {
		return err
	}
	for _, info := range running {
		if slices.Contains(recorded, info.ID) || minAge > 0 && (info.ForBuild() || time.Since(info.StartedAt) < minAge) {
			continue
		}
		if err := mgr.Kill(ctx, info.ID); err != nil {
			log.Warn("kill a sandbox the cluster forgot", logx.SandboxID(info.ID), logx.Err(err))
			continue
		}
		log.Info("killed a sandbox the cluster forgot", logx.SandboxID(info.ID))
	}
	return nil
}
