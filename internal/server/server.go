// Package server wires Cove's serving roles: `cove server` (the
// E2B-compatible API, the sandbox proxy, the dashboard and a node on one
// listener, its state in SQLite or PostgreSQL), and a cluster's `cove api`
// (api.go) and `cove node` (node.go).
package server

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/covesandbox/cove/internal/connguard"
	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/httpapi"
	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/dashboard"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fdbudget"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/lxcfs"
	"github.com/covesandbox/cove/internal/metrics"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/objstore"
	"github.com/covesandbox/cove/internal/proxy"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/secrets"
	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/volume"
)

// Config configures the all-in-one server.
type Config struct {
	Listen  string
	DataDir string
	Domain  string
	APIKeys []string // added at start (team "default")
	// AdminToken, when set, is the operator's token for X-Admin-Token.
	AdminToken string
	// CgroupParent names the group, under the server's own cgroup, holding
	// the sandboxes' groups (default "cove").
	CgroupParent string
	// Network, when set, gives every sandbox its own network (veth, NAT,
	// firewall); nil leaves sandboxes with loopback only.
	Network *network.Config
	// Descriptors is the process's one descriptor budget, which what
	// tenants and unauthenticated clients make the server hold takes
	// from: egress flows, connections not yet authenticated (nil:
	// fdbudget.Process() once the limit is raised).
	Descriptors *fdbudget.Budget
	// Out receives the one-time message with a generated API key.
	Out io.Writer
	// LocalImages lets template builds read images from the server's disk
	// (oci:DIR, docker-archive:FILE).
	LocalImages bool
	// SandboxBinary, when set, is the small init-and-agent binary
	// (cove-sandbox) sandboxes start from; "" starts them from cove itself.
	SandboxBinary string
	// TLSListen, when set, serves the same API and proxy over HTTPS there:
	// E2B's domain mode (api.<domain>, <port>-<id>.<domain>). TLSCert and
	// TLSKey are the operator's certificate; without them a local CA in
	// the data directory issues one.
	TLSListen, TLSCert, TLSKey string
	// LXCFS is where lxcfs is mounted, or started (lxcfs.Ensure), for
	// sandboxes' /proc to tell their own limits; "off" goes without.
	LXCFS string
	// MetricsInterval is how often each sandbox's use is sampled into its
	// metric history (default 5 s).
	MetricsInterval time.Duration
	// VolumeSizeMB is a new volume's size (default 1024).
	VolumeSizeMB int64
	// PauseToDiskAfter, when above 0, is how long a sandbox stays paused
	// with its memory in RAM before it is written to disk (gVisor).
	PauseToDiskAfter time.Duration
	// MetricsListen, when set, serves Prometheus metrics there at
	// /metrics (cove server, cove node): no token; bind it where only the
	// scraper reaches.
	MetricsListen string
	// DebugListen, when set, serves Go's pprof profiles there (loopback
	// only: it shows the server's internals).
	DebugListen string
	// PoolSize is how many warm sandboxes to keep per template in use (0:
	// none): a create is then a hand-over.
	PoolSize int
	// PoolSkip are templates (by id) kept no warm sandboxes of.
	PoolSkip []string
	// Admission caps what the node promises its sandboxes and each team.
	Admission node.Admission
	// NoUserNamespaces runs namespaces sandboxes without a user namespace
	// of their own: their root is the host's root, their users the host's
	// (an operator's opt-out; kernels without id-mapped mounts need it).
	NoUserNamespaces bool
	// Debootstrap is the program that builds the built-in Debian templates
	// ("" = debootstrap from PATH).
	Debootstrap string
	// DebianMirror is the Debian archive they are built from ("" = the
	// first one the host's apt sources name).
	DebianMirror string
	// Base is what the name base serves: BaseHost ("" too) or BaseDebian.
	Base string
	// PrepareTemplates builds the built-in templates that are not built
	// yet (debian, code-interpreter-v1) in the background from the start,
	// where this host can (debootstrap is installed).
	PrepareTemplates bool
	// Ready, when set, receives the listener's address once serving.
	Ready func(addr net.Addr)
	// DefaultIsolation is the driver of sandboxes that ask for none:
	// "namespaces" (the default), "gvisor" or "microvm".
	DefaultIsolation string
	// Runsc is gVisor's runsc ("" = PATH's); without one the gvisor driver
	// is unavailable, with the reason given to whoever asks for it.
	Runsc string
	// PrepareDrivers, when set, is a shell command that prepares what the
	// missing drivers need, run in the background once the node serves;
	// they join when it ends (prepareDrivers).
	PrepareDrivers string
	// QEMU is qemu-system-x86_64 ("" = PATH's) and GuestKernel the
	// directory of the guests' kernel ("" = the one scripts/guest-kernel.sh
	// unpacks) of the microvm driver; without either it is unavailable.
	QEMU, GuestKernel string
	// MicroVMBindImages gives microVM guests the read-only host
	// directories their templates bind (the base template's /usr) as
	// erofs images, made in the background, instead of over virtiofs, so
	// that those guests can be saved with their memory.
	MicroVMBindImages bool
	// MicroVMBootSnapshots starts microVM guests from a snapshot of their
	// template's guest taken once it booted, their memory its file shared
	// copy-on-write, instead of booting each.
	MicroVMBootSnapshots bool
	// Database, when set, is a PostgreSQL connection string: the API's
	// state (keys, the secret, sandbox records) lives there instead of
	// SQLite in the data directory. A cluster's API replicas and nodes
	// share one (its membership lives there too).
	Database string
	// NodeToken is the secret a cluster's API replicas present to its
	// nodes (cove api, cove node).
	NodeToken string
	// NodeName names a node in its cluster (default: the host's name);
	// NodeURL is where API replicas reach its node API (default: http://
	// and the listen address).
	NodeName, NodeURL string
	// MaxTeamVolumes caps the volumes one team keeps on a node (0:
	// volume.DefaultMaxPerTeam).
	MaxTeamVolumes int
	// WebhookAllow are ranges webhooks may be sent to although loopback,
	// private or the host's; EventsKept is how long lifecycle events are
	// kept (default 7 days).
	WebhookAllow []netip.Prefix
	EventsKept   time.Duration
	// RegistryAllow are ranges template builds may pull images from
	// (registries, their token realms, their redirects) although
	// loopback, link-local, private, this host's or a node's (addrpolicy).
	RegistryAllow []netip.Prefix
	// SecretsKeyFile is the operator's key that seals teams' secrets
	// (64 hex digits, owner-only). cove server: default the data
	// directory's secrets.key, made at the first start; cove api and cove
	// node: none unless given (no secrets are kept, and rules that name
	// one are refused).
	SecretsKeyFile string
	// IdentityKeyFile is the operator's key that signs sandboxes'
	// workload tokens (ECDSA P-256, PEM, owner-only); IdentityIssuer the
	// URL that publishes it (default the API's: https://api.<domain> in
	// domain mode, else http://<domain>). cove server: default the data
	// directory's identity.key, made at the first start; cove api (which
	// publishes it) and cove node (which mints): none unless given.
	IdentityKeyFile, IdentityIssuer string
	// NodeLease is how long a node may go without a heartbeat before an
	// API replica takes it for lost (default 8 s).
	NodeLease time.Duration
	// NodeTLSCert and NodeTLSKey (PEM files) are a cluster role's own
	// certificate for the node API, NodeTLSCA the CA that signed every
	// role's: with them, nodes serve the node API over TLS to replicas
	// that present a certificate of that CA, and replicas check nodes'.
	NodeTLSCert, NodeTLSKey, NodeTLSCA string
	// NodeTLSServerName, when set, is the name a replica checks every
	// node's certificate for (default: the host of the node's URL).
	NodeTLSServerName string
	// ObjectStore, in a cluster, is the S3-compatible bucket its nodes
	// share templates through (http(s)://host[:port]/bucket[/prefix]),
	// signed with ObjectStoreCredentials. Without it, a cluster builds
	// no templates.
	ObjectStore            string
	ObjectStoreCredentials objstore.Credentials
	// Unauthenticated bounds the connections of every listener (the API's
	// and proxy's, HTTPS, the node API) that have not authenticated yet:
	// how many in all and per address, and how long each may wait.
	Unauthenticated connguard.Limits
}

// Run serves until ctx ends, then shuts down cleanly; running sandboxes
// keep running and are adopted by the next start.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := checkBase(cfg.Base); err != nil {
		return err
	}
	if cfg.PoolSize < 0 {
		return fmt.Errorf("pool size %d: want 0 or more", cfg.PoolSize)
	}
	unlock, err := prepare(cfg.DataDir, true, log)
	if err != nil {
		return err
	}
	defer unlock()
	if cfg.Descriptors, err = descriptorBudget(cfg.Descriptors, log); err != nil {
		return err
	}
	began := time.Now()
	step := func(name string) { log.Debug("start-up", "step", name, "at", time.Since(began)) }
	st, release, err := openStore(ctx, cfg.Database, cfg.DataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	defer release()
	// The server is its state's one API: a keyed create still in progress
	// died with the process before it (its sandbox, never recorded, is
	// removed as the node recovers), and runs again when retried.
	if err := st.AbandonIdempotent(ctx); err != nil {
		return err
	}
	if cfg, err = setupKeys(ctx, st, cfg); err != nil {
		return err
	}
	secret, err := st.Secret(ctx, "envd-token", auth.NewSecret)
	if err != nil {
		return err
	}
	step("store")
	templates, err := template.NewStore(filepath.Join(cfg.DataDir, "templates"), log)
	if err != nil {
		return fmt.Errorf("prepare templates: %w", err)
	}
	step("templates")
	if missing := template.MissingBaseCommands(); len(missing) > 0 && cfg.Base != BaseDebian {
		log.Warn("the base template (the host's /usr) lacks commands E2B's base has: apt-get install "+strings.Join(missing, " "), "packages", missing)
	}
	cfg.LXCFS = startLXCFS(ctx, cfg.LXCFS, log)
	drivers, err := openDrivers(cfg, log)
	if err != nil {
		return err
	}
	defer drivers.Close()
	step("driver")
	var svc *service.Service
	var tpls *service.Templates
	nodeCfg := node.Config{
		Drivers: drivers.more, Unavailable: drivers.unavailable,
		Dir:        filepath.Join(cfg.DataDir, "node"),
		PoolSize:   cfg.PoolSize,
		SpillAfter: cfg.PauseToDiskAfter,
		Admission:  cfg.Admission,
		Secret:     secret,
		OnState: func(info sandboxes.Info) {
			if !info.ForBuild() {
				svc.StateChanged(info)
			}
		},
		OnEnd: func(info sandboxes.Info) {
			if !info.ForBuild() {
				svc.Ended(info.ID, info.Exit)
			}
			tpls.SandboxEnded()
		},
		OnWarm: func(templateID, buildID string, err error) {
			why := ""
			if err != nil {
				why = err.Error()
			}
			if serr := templates.SetWarmError(templateID, buildID, why); serr != nil {
				log.Warn("record why warm sandboxes fail", "template", templateID, logx.Err(serr))
			}
		},
	}
	key, err := secretsKey(cfg, true)
	if err != nil {
		return err
	}
	nets, err := openNetworks(cfg, st, key, log)
	if err != nil {
		return err
	}
	if nets != nil {
		nodeCfg.Networks = nets // a nil *Manager is not a nil interface
		defer nets.Close()      // rules stay while sandboxes do; the next start rebuilds them
	}
	step("network")
	mgr, vols, reg, observed, err := newNode(ctx, cfg, nodeCfg, drivers.def, templates, log)
	if err != nil {
		return err
	}
	defer mgr.Close()
	builds, stopBuilds := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBuilds()
	builder := template.NewBuilder(templates, mgr, log)
	builder.AllowLocalImages, builder.Registries = cfg.LocalImages, registryPolicy(cfg, nil)
	builder.Debootstrap, builder.Mirror = cfg.Debootstrap, cfg.DebianMirror
	builder.Observe = observed.Built
	tpls = service.NewTemplates(builds, templates, builder, mgr.LayersInUse, secret, log)
	tpls.KeepLogs(st)
	tpls.MaxTeamStorageMB = cfg.Admission.Team.StorageMB
	defer func() { // builds end (cancelled) before what they use closes
		stopBuilds()
		tpls.Wait()
	}()
	ln, err := listen(&cfg)
	if err != nil {
		return err
	}
	defer ln.Close()
	// The issuer's default URL is the API's, whose port the listener gave.
	issuer, err := identityIssuer(cfg, true)
	if err != nil {
		return err
	}
	if nets != nil {
		nets.SetIdentity(issuer)
	}
	var ranges []netip.Prefix
	if cfg.Network != nil {
		ranges = append(ranges, cfg.Network.Range)
	}
	nodeRanges := func() []netip.Prefix { return ranges }
	svc = service.New(service.Config{Domain: cfg.Domain, CanUseTemplate: tpls.CanUse, MetricsInterval: cfg.MetricsInterval,
		Snapshots: templates, ReserveStorage: tpls.ReserveStorage, TeamQuota: cfg.Admission.Team, SecretsKey: key, WebhookAllow: cfg.WebhookAllow,
		SandboxRanges: nodeRanges, Identity: issuer}, st, mgr, secret, log)
	tpls.Quotas = svc.TeamQuota
	volumes := service.NewVolumes(vols, secret)
	volumes.CheckStorage, tpls.VolumeBytes = tpls.CheckStorage, volumes.TeamBytes
	step("node")
	if _, _, err := mgr.Recover(ctx); err != nil {
		return fmt.Errorf("recover sandboxes: %w", err)
	}
	step("recover")
	if err := svc.Reconcile(ctx); err != nil {
		return fmt.Errorf("reconcile sandboxes: %w", err)
	}
	step("reconcile")
	tpls.SandboxEnded() // layers of templates deleted while the server was down
	if err := mgr.Warm(ctx, template.BaseName); err != nil {
		return fmt.Errorf("warm sandboxes: %w", err)
	}

	step("warm")
	if cfg.PrepareTemplates {
		tpls.PrepareBuiltins()
	}
	if cfg.Base == BaseDebian {
		startBase(ctx, templates, tpls, warmer(mgr, cfg.PoolSize), log)
	}
	sampling, stopSampling := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSampling()
	go svc.RunSampler(sampling)
	go svc.PruneLogs(sampling)
	go svc.PruneEvents(sampling, cfg.EventsKept)
	go svc.RunWebhooks(sampling)
	files := httpapi.NewVolumeFiles(vols.Locate, log)
	api := httpapi.New(svc, tpls, volumes, files.Files, st, log)
	api.AdminToken = cfg.AdminToken
	dash, err := dashboard.New(ctx, dashboard.Config{Store: st, API: api, Log: log, CanSee: tpls.Visible, AdminToken: cfg.AdminToken, Nodes: func(context.Context) ([]dashboard.NodeStatus, error) {
		l := mgr.Load()
		return []dashboard.NodeStatus{{ID: "this server", Drivers: mgr.Isolations(), CPUs: l.CPUs, MemoryMB: l.MemoryMB,
			CommittedCPUMillis: l.CommittedCPUMillis, CommittedMemoryMB: l.CommittedMemoryMB, Sandboxes: l.Sandboxes, Warm: l.Warm}}, nil
	}, Usage: mgr.Usage})
	if err != nil {
		return err
	}
	px := proxy.New(mgr, svc, cfg.Domain, log)
	stopPreparing, err := prepareDrivers(ctx, cfg, drivers, mgr, log)
	if err != nil {
		return err
	}
	defer stopPreparing()
	return serve(ctx, cfg, ln, api, dash, px, httpMetrics(reg), "cove server", log)
}

// newNode makes the node of a role that runs sandboxes (cove server,
// cove node) over nodeCfg: with the host's volumes and, with
// --metrics-listen, its metrics, served from reg (nil without).
func newNode(ctx context.Context, cfg Config, nodeCfg node.Config, driver isolation.Driver, templates *template.Store, log *slog.Logger) (*node.Manager, *volume.Store, *prometheus.Registry, *metrics.Node, error) {
	vols, err := openVolumes(cfg, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	nodeCfg.Volumes = vols
	reg, err := openMetrics(ctx, cfg, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var observed *metrics.Node
	if reg != nil {
		observed = metrics.NewNode(reg)
		nodeCfg.Observer = observed
	}
	mgr, err := node.New(nodeCfg, driver, templates, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if observed != nil {
		observed.Watch(mgr)
	}
	return mgr, vols, reg, observed, nil
}

// openVolumes opens the host's volumes (each made VolumeSizeMB, 1 GiB by
// default).
func openVolumes(cfg Config, log *slog.Logger) (*volume.Store, error) {
	size := cmp.Or(cfg.VolumeSizeMB, 1024)
	vols, err := volume.Open(filepath.Join(cfg.DataDir, "volumes"), size, log)
	if err != nil {
		return nil, fmt.Errorf("open volumes: %w", err)
	}
	vols.MaxPerTeam = cfg.MaxTeamVolumes
	return vols, nil
}

// listen opens the API's listener and, when none is set, the sandbox
// domain, whose default carries the listener's port (getHost URLs must
// reach it).
func listen(cfg *Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain(ln.Addr().String())
	}
	return ln, nil
}

// localDomain reports whether domain (host[:port]) is localhost or under
// it: the default mode, where sandboxes' hosts resolve to this machine.
func localDomain(domain string) bool {
	host := domain
	if h, _, err := net.SplitHostPort(domain); err == nil {
		host = h
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// serve answers the API and the sandbox proxy on ln (and on cfg.TLSListen)
// until ctx ends, then shuts the listeners down.
//
// Every listener's connections count against one guard until they
// authenticate (cfg.Unauthenticated, cfg.Descriptors); a failed accept is
// retried, and /health says how the listeners fare.
func serve(ctx context.Context, cfg Config, ln net.Listener, api *httpapi.API, dash *dashboard.Handler, px *proxy.Proxy, m *metrics.HTTP, role string, log *slog.Logger) error {
	guard, err := connguard.New(cfg.Unauthenticated, cfg.Descriptors, log)
	if err != nil {
		return err
	}
	api.Health = health(guard, cfg.Descriptors)
	var apis, sandboxes http.Handler = api, px
	if m != nil {
		apis, sandboxes = m.API(api), m.Proxy(px)
		m.Connections(guardMetrics(guard))
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case px.Match(r):
			sandboxes.ServeHTTP(w, r)
		case dashboard.Match(r):
			dash.ServeHTTP(w, r)
		default:
			apis.ServeHTTP(w, r)
		}
	})
	if cfg.DebugListen != "" {
		if err := serveDebug(cfg.DebugListen, log); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 640 * time.Second}
	guard.Serve(srv)
	guarded := guard.Listen(ln)
	ln = guarded
	errc := make(chan error, 2)
	if cfg.TLSListen != "" {
		tlsSrv, err := serveTLS(cfg, handler, guard, errc, log)
		if err != nil {
			return err
		}
		defer func() {
			shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = tlsSrv.Shutdown(shut)
		}()
	}
	if cfg.TLSListen == "" && localDomain(cfg.Domain) {
		// The default mode: HTTPS on the same port, for the URLs the SDKs
		// make https:// whatever the server speaks.
		tc, caPath, err := tlsConfig(cfg.DataDir, cfg.Domain, cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return err
		}
		ln = listenBoth(guarded, tc, guard.Wait())
		log.Info("HTTPS on the same port too, for https:// URLs of sandboxes' ports", "url", "https://<port>-<id>."+cfg.Domain, "trust", caPath)
	}
	go func() { errc <- srv.Serve(ln) }()
	log.Info(role+" listening", "addr", ln.Addr().String(), "data", cfg.DataDir, "domain", cfg.Domain)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down; sandboxes keep running and are adopted on the next start")
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// prepare makes the data directory, which only the server's user may
// enter (it holds the database with the secret agent tokens derive from,
// uploaded files and template layers, whose setuid files must not run for
// anyone), takes it for this process and, where sandboxes run, hardens
// the host.
func prepare(dataDir string, sandboxes bool, log *slog.Logger) (unlock func(), err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return nil, err
	}
	if unlock, err = lockDataDir(dataDir); err != nil {
		return nil, err
	}
	raiseFileLimit(log)
	if !sandboxes {
		return unlock, nil
	}
	if err := restrictKernelPointers(log); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// descriptorBudget is b, or the process's budget (made after
// raiseFileLimit: it divides the limit as raised).
func descriptorBudget(b *fdbudget.Budget, log *slog.Logger) (*fdbudget.Budget, error) {
	if b != nil {
		return b, nil
	}
	b, err := fdbudget.Process()
	if err != nil {
		return nil, err
	}
	log.Debug("descriptor budget", "shared", b.Shared(), "reserve", b.Reserve())
	return b, nil
}

// startLXCFS finds or starts lxcfs ("off": without) and returns where it
// is mounted, "" when sandboxes go without.
func startLXCFS(ctx context.Context, want string, log *slog.Logger) string {
	if want == "off" {
		return ""
	}
	dir, err := lxcfs.Ensure(ctx, cmp.Or(want, lxcfs.DefaultDir), log)
	if err != nil {
		log.Warn("sandboxes' /proc tells the host's memory and CPUs, not theirs", logx.Err(err))
	}
	return dir
}

// openNetworks makes the sandboxes' networks (nil without cfg.Network):
// its egress proxy keeps its CA in the data directory and reveals the
// secrets of st that key opens (none without a key).
func openNetworks(cfg Config, st store.Store, key *secrets.Key, log *slog.Logger) (*network.Manager, error) {
	if cfg.Network == nil {
		return nil, nil
	}
	netCfg := *cfg.Network
	netCfg.Owner = "data dir " + cfg.DataDir + ", listening on " + cfg.Listen
	if netCfg.CADir == "" {
		netCfg.CADir = filepath.Join(cfg.DataDir, "egress-ca")
	}
	if key != nil {
		netCfg.Secrets = service.Vault{Store: st, Key: key}
	}
	netCfg.Descriptors = cfg.Descriptors
	nets, err := network.New(netCfg, log)
	if err != nil {
		return nil, fmt.Errorf("sandbox networks: %w (run with --network=false to give sandboxes loopback only)", err)
	}
	return nets, nil
}

// setupKeys adds the configured keys (to the team "default"); with none
// stored at all, it creates one to print once, and otherwise says that
// keys exist and how to make another. What it says is printed once the
// server listens, after its start's log lines, where a user looks last
// (the Config it returns does so in Ready).
func setupKeys(ctx context.Context, st store.Store, cfg Config) (Config, error) {
	out := cfg.Out
	if out == nil {
		out = os.Stdout
	}
	var said bytes.Buffer
	if err := addKeys(ctx, st, cfg, &said); err != nil {
		return cfg, err
	}
	ready := cfg.Ready
	cfg.Ready = func(a net.Addr) {
		_, _ = out.Write(said.Bytes())
		if ready != nil {
			ready(a)
		}
	}
	return cfg, nil
}

func addKeys(ctx context.Context, st store.Store, cfg Config, out io.Writer) error {
	if cfg.AdminToken != "" && len(cfg.AdminToken) < 32 {
		return fmt.Errorf("admin token: at least 32 characters (openssl rand -hex 32 makes one)")
	}
	now := time.Now().UTC()
	for _, k := range cfg.APIKeys {
		if k == "" {
			continue
		}
		if !auth.ValidKeyFormat(k) {
			return fmt.Errorf("api key must be \"e2b_\" followed by 40 lowercase hex digits (the form the E2B SDKs accept)")
		}
		if err := st.AddAPIKey(ctx, store.APIKey{Hash: auth.HashAPIKey(k), Team: DefaultTeam, Name: "flag", CreatedAt: now, Mask: auth.Mask(k)}); err != nil {
			return err
		}
	}
	n, err := st.CountAPIKeys(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		fmt.Fprintf(out, "%d API keys exist (stored hashed, in %s). A lost key cannot be shown again: `cove key create --team %s --name NAME%s` makes another.\n",
			n, storeWhere(cfg.Database, cfg.DataDir), DefaultTeam, storeFlags(cfg.Database, cfg.DataDir))
		return nil
	}
	if _, err := st.Team(ctx, DefaultTeam); errs.Is(err, errs.NotFound) {
		err = st.AddTeam(ctx, store.Team{ID: DefaultTeam, Name: DefaultTeam, CreatedAt: now})
		if err != nil && !errs.Is(err, errs.AlreadyExists) {
			return err
		}
	} else if err != nil {
		return err
	}
	key, _, err := service.CreateKey(ctx, st, DefaultTeam, "generated")
	if err != nil {
		return err
	}
	PrintKey(out, key, cfg.Listen, storeWhere(cfg.Database, cfg.DataDir))
	return nil
}

// DefaultTeam is the team of the keys a server starts with.
const DefaultTeam = "default"

// storeWhere says where the server's state is, for messages.
func storeWhere(database, dataDir string) string {
	if database != "" {
		return "the PostgreSQL database"
	}
	return filepath.Join(dataDir, "cove.db")
}

// storeFlags are the flags of `cove key` and `cove team` that name the
// same state as the server's, when it is not the default data directory.
func storeFlags(database, dataDir string) string {
	switch {
	case database != "":
		return " --database …"
	case dataDir != DefaultDataDir():
		return " --data-dir " + dataDir
	}
	return ""
}

// DefaultDataDir is where cove server, cove key and cove team keep and
// find the state when not told: /var/lib/cove as root, else
// ~/.local/share/cove.
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/cove"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".cove"
	}
	return filepath.Join(home, ".local", "share", "cove")
}

// OpenStore opens the state a server keeps — its PostgreSQL database, else
// the data directory's SQLite — for the commands that manage teams and
// keys beside it (a running server sees their changes at once).
func OpenStore(ctx context.Context, database, dataDir string) (store.Store, error) {
	if database != "" {
		return postgres.Open(ctx, database)
	}
	path := filepath.Join(dataDir, "cove.db")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no Cove data in %s (start cove server first, or give --data-dir): %w", dataDir, err)
	}
	return sqlite.Open(ctx, path)
}

// openStore opens the server's state: PostgreSQL when database names one
// (a connection URL or key=value string), which the server then owns
// (another cove server on it is refused: each reconciles the database
// with its own sandboxes), else SQLite in the data directory.
func openStore(ctx context.Context, database, dataDir string) (store.Store, func(), error) {
	if database == "" {
		st, err := sqlite.Open(ctx, filepath.Join(dataDir, "cove.db"))
		return st, func() {}, err
	}
	st, err := postgres.Open(ctx, database)
	if err != nil {
		return nil, nil, err
	}
	release, err := st.Own(ctx, "cove server")
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, release, nil
}

// PrintKey shows a new key once, with the variables the E2B SDKs and the
// CLI read for a server listening on listen; where says where it is kept.
func PrintKey(out io.Writer, key, listen, where string) {
	url := "http://" + loopbackAddr(listen)
	fmt.Fprintf(out, `Created an API key. It is stored hashed (in %[3]s) and shown only now:

    E2B_API_KEY=%[1]s

Point the official E2B SDKs at this server:

    export E2B_API_URL=%[2]s E2B_SANDBOX_URL=%[2]s E2B_VOLUME_API_URL=%[2]s E2B_API_KEY=%[1]s

(E2B_VOLUME_API_URL is for the volumes' content API: Volume.writeFile, readFile …)

and the cove CLI (bin/cove, or on PATH after make install):

    export COVE_API_URL=%[2]s COVE_API_KEY=%[1]s

A lost key cannot be shown again: cove key create makes another.

`, key, url, where)
}

// DefaultDomain is the sandbox domain of a server listening on addr
// without one configured: localhost with the port, so that the SDK's
// getHost(port) — {port}-{id}.localhost:{listen port} — reaches the proxy.
// Names under localhost resolve to loopback where the host's resolver
// has nss-myhostname (Debian's libnss-myhostname; curl and browsers do it
// themselves).
func DefaultDomain(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "80" {
		return "localhost"
	}
	return "localhost:" + port
}

// loopbackAddr is the address a client on this host dials for a listen
// address (an unspecified host is loopback).
func loopbackAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// identityIssuer loads the operator's identity key
// (Config.IdentityKeyFile) as the issuer of Config.IdentityIssuer; a
// server (own) makes the data directory's on its first start, other roles
// go without unless given one.
func identityIssuer(cfg Config, own bool) (*svid.Issuer, error) {
	path := cfg.IdentityKeyFile
	if path == "" {
		if !own {
			return nil, nil
		}
		path = filepath.Join(cfg.DataDir, "identity.key")
	}
	key, err := svid.LoadKey(path, path != cfg.IdentityKeyFile)
	if err != nil {
		return nil, err
	}
	issuerURL := cfg.IdentityIssuer
	switch {
	case issuerURL != "":
	case cfg.Domain == "":
		return nil, fmt.Errorf("identity key %s: give --identity-issuer too (there is no sandbox domain to take the API's URL from)", path)
	case cfg.TLSListen != "":
		issuerURL = "https://api." + cfg.Domain
	default:
		issuerURL = "http://" + cfg.Domain
	}
	return svid.New(key, issuerURL)
}

// secretsKey loads the operator's secrets key (Config.SecretsKeyFile); a
// server (own) makes the data directory's on its first start, other roles
// go without unless given one.
func secretsKey(cfg Config, own bool) (*secrets.Key, error) {
	if cfg.SecretsKeyFile != "" {
		return secrets.LoadKey(cfg.SecretsKeyFile, false)
	}
	if !own {
		return nil, nil
	}
	return secrets.LoadKey(filepath.Join(cfg.DataDir, "secrets.key"), true)
}
