package cli

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/covesandbox/cove/internal/connguard"
	"github.com/covesandbox/cove/internal/isolation/microvm"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/objstore"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/volume"
)

// runFlags are the flags of the commands that run Cove's roles (server,
// node, api), each adding the groups it uses.
type runFlags struct {
	cfg       server.Config
	apiKey    string
	verbose   bool
	netOn     bool
	userNS    bool
	netRange  string
	netAllow  []string
	upCA      string
	hookAllow []string
	regAllow  []string
	egressNS  []string
	flows     network.FlowLimits
}

// common are every role's flags: where it listens, keeps its data and
// state, and how much it logs.
func (r *runFlags) common(f *pflag.FlagSet, listen, listenHelp string) {
	f.StringVar(&r.cfg.Listen, "listen", envOr("COVE_LISTEN", listen), listenHelp+" (COVE_LISTEN)")
	f.StringVar(&r.cfg.DataDir, "data-dir", envOr("COVE_DATA_DIR", defaultDataDir()), "where state, templates and sandboxes live (COVE_DATA_DIR)")
	f.StringVar(&r.cfg.Database, "database", os.Getenv("COVE_DATABASE"), "a PostgreSQL connection string (postgres://user:pass@host/db, or key=value pairs): the state lives there (cove server: instead of SQLite in the data directory, one server per database; a cluster's api and node share one) (COVE_DATABASE)")
	f.StringVar(&r.cfg.SecretsKeyFile, "secrets-key-file", os.Getenv("COVE_SECRETS_KEY_FILE"), "the operator's key that seals teams' secrets: a file of 64 hex digits (openssl rand -hex 32) readable by its owner only (COVE_SECRETS_KEY_FILE); cove server: default secrets.key in the data directory, made at the first start; cove api and cove node: every API replica and node of a cluster needs the same one for secrets (/secrets and rules that name one)")
	f.StringVar(&r.cfg.IdentityKeyFile, "identity-key-file", os.Getenv("COVE_IDENTITY_KEY_FILE"), "the operator's key that signs sandboxes' workload identity tokens (iam): an ECDSA P-256 private key in PEM (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256) readable by its owner only (COVE_IDENTITY_KEY_FILE); cove server: default identity.key in the data directory, made at the first start; cove api (which publishes its public key) and cove node (which mints): every API replica and node of a cluster needs the same one for iam")
	f.StringVar(&r.cfg.IdentityIssuer, "identity-issuer", os.Getenv("COVE_IDENTITY_ISSUER"), "the workload tokens' issuer, the URL that serves /.well-known/openid-configuration and /.well-known/jwks.json: what a cloud's token exchange is told to trust (COVE_IDENTITY_ISSUER; default the API's, https://api.<domain> in domain mode, else http://<domain>)")
	f.BoolVarP(&r.verbose, "verbose", "v", false, "log debug messages")
	f.IntVar(&r.cfg.Unauthenticated.Total, "unauthenticated-max", envInt("COVE_UNAUTHENTICATED_MAX", connguard.DefaultTotal), "connections the listeners hold at once that no request has authenticated yet (an API key, a session, a sandbox's token, the node token); a new one past it, or past what the descriptor limit's shared part leaves, is closed at once (COVE_UNAUTHENTICATED_MAX)")
	f.IntVar(&r.cfg.Unauthenticated.PerSource, "unauthenticated-per-address", envInt("COVE_UNAUTHENTICATED_PER_ADDRESS", connguard.DefaultPerSource), "of those, how many one client address holds (an IPv6 /64 counts as one) (COVE_UNAUTHENTICATED_PER_ADDRESS)")
	f.DurationVar(&r.cfg.Unauthenticated.Wait, "unauthenticated-wait", envDuration("COVE_UNAUTHENTICATED_WAIT", connguard.DefaultWait), "how long a connection not yet authenticated may take to send a request (its first byte, TLS handshake and headers) and may stay idle between requests before it is closed (COVE_UNAUTHENTICATED_WAIT)")
}

// api are the flags of the roles that serve the E2B API.
func (r *runFlags) api(f *pflag.FlagSet) {
	f.StringVar(&r.apiKey, "api-key", os.Getenv("COVE_API_KEY"), "an API key to accept, e2b_ + 40 hex, of the team default (COVE_API_KEY); without any key one is created and printed")
	f.StringVar(&r.cfg.AdminToken, "admin-token", os.Getenv("COVE_ADMIN_TOKEN"), "the operator's token (at least 32 characters; COVE_ADMIN_TOKEN): a request with it in X-Admin-Token acts for the team X-Team-ID names, and may manage its keys (/api-keys); unset: no admin access")
	f.StringVar(&r.cfg.Domain, "domain", os.Getenv("COVE_DOMAIN"), "sandbox domain: {port}-{id}.{domain} reaches a sandbox's port (default localhost:<listen port>; COVE_DOMAIN)")
	f.StringVar(&r.cfg.TLSListen, "tls-listen", os.Getenv("COVE_TLS_LISTEN"), "serve HTTPS here too, E2B's domain mode: E2B_DOMAIN=<domain> alone points the SDK at https://api.<domain> (default :443 when --domain names a domain without a port, off to turn it off; COVE_TLS_LISTEN)")
	f.StringVar(&r.cfg.TLSCert, "tls-cert", os.Getenv("COVE_TLS_CERT"), "the HTTPS certificate (PEM) for api.<domain> and *.<domain>; default: one from a local CA in the data directory (COVE_TLS_CERT)")
	f.StringVar(&r.cfg.TLSKey, "tls-key", os.Getenv("COVE_TLS_KEY"), "the HTTPS certificate's key (PEM; COVE_TLS_KEY)")
	f.StringSliceVar(&r.hookAllow, "webhook-allow", envList("COVE_WEBHOOK_ALLOW", nil), "CIDRs webhooks may be sent to although they are loopback, link-local, private, CGNAT, this host's or a node's (COVE_WEBHOOK_ALLOW, comma-separated); sandbox ranges stay refused")
	f.DurationVar(&r.cfg.EventsKept, "events-kept", envDuration("COVE_EVENTS_KEPT", 7*24*time.Hour), "how long sandboxes' lifecycle events are kept (COVE_EVENTS_KEPT)")
	f.DurationVar(&r.cfg.MetricsInterval, "metrics-interval", 5*time.Second, "how often each sandbox's CPU, memory and disk are sampled into its metric history")
	f.StringVar(&r.cfg.DebugListen, "debug-listen", os.Getenv("COVE_DEBUG_LISTEN"), "serve Go's pprof profiles on this loopback address (COVE_DEBUG_LISTEN)")
}

// sandboxes are the flags of the roles that run sandboxes.
func (r *runFlags) sandboxes(f *pflag.FlagSet) {
	f.StringVar(&r.cfg.CgroupParent, "cgroup-parent", envOr("COVE_CGROUP_PARENT", "cove"), "cgroup (under the server's own) that holds the sandboxes' groups (COVE_CGROUP_PARENT)")
	f.BoolVar(&r.netOn, "network", envOr("COVE_NETWORK", "true") == "true", "give each sandbox its own network with NAT egress (COVE_NETWORK); false: loopback only")
	f.StringVar(&r.netRange, "network-range", envOr("COVE_NETWORK_RANGE", network.DefaultRange.String()), "private range sandbox addresses come from (COVE_NETWORK_RANGE)")
	f.StringVar(&r.upCA, "upstream-ca", os.Getenv("COVE_UPSTREAM_CA"), "a PEM bundle of CAs the egress proxy trusts besides the host's roots, for the HTTPS servers sandboxes' rules send secrets to and for upstream proxies over TLS: a private upstream's CA (COVE_UPSTREAM_CA)")
	f.StringSliceVar(&r.netAllow, "network-allow", envList("COVE_NETWORK_ALLOW", nil), "private CIDRs sandboxes may reach after all (COVE_NETWORK_ALLOW, comma-separated); the host, link-local and other sandboxes stay blocked")
	f.StringSliceVar(&r.regAllow, "registry-allow", envList("COVE_REGISTRY_ALLOW", nil), "CIDRs template builds may pull images from (registries, their token services and redirects) although they are loopback, link-local, private, CGNAT, this host's or a node's (COVE_REGISTRY_ALLOW, comma-separated); sandboxes' ranges stay refused")
	f.StringSliceVar(&r.egressNS, "egress-nameserver", envList("COVE_EGRESS_NAMESERVERS", nil), "host:port of the resolvers where the egress proxy looks up the names allowOut lets through, a connection by name going only where its name leads (COVE_EGRESS_NAMESERVERS, comma-separated; default: the sandboxes' resolvers, port 53)")
	f.IntVar(&r.flows.PerSandbox, "egress-max-connections", envInt("COVE_EGRESS_MAX_CONNECTIONS", 256), "connections one sandbox may hold open through the egress proxy (allowOut names, rules, egressProxy); more are reset (COVE_EGRESS_MAX_CONNECTIONS)")
	f.IntVar(&r.flows.PerTeam, "egress-max-connections-team", envInt("COVE_EGRESS_MAX_CONNECTIONS_TEAM", 0), "connections the sandboxes of one team may hold open together through the node's egress proxy, so that other teams still connect; more are reset (COVE_EGRESS_MAX_CONNECTIONS_TEAM; 0: half of what the node holds)")
	f.DurationVar(&r.flows.Idle, "egress-idle-timeout", envDuration("COVE_EGRESS_IDLE_TIMEOUT", 5*time.Minute), "how long a connection through the egress proxy may move no byte before it is closed (COVE_EGRESS_IDLE_TIMEOUT)")
	f.IntVar(&r.cfg.PoolSize, "pool-size", envInt("COVE_POOL_SIZE", 4), "warm sandboxes kept ready per template in use; a create takes one (COVE_POOL_SIZE; 0: none)")
	f.StringSliceVar(&r.cfg.PoolSkip, "pool-skip", envList("COVE_POOL_SKIP", []string{"desktop"}), "templates kept no warm sandboxes of, whatever --pool-size says: a create of one starts it (COVE_POOL_SKIP, comma-separated; default desktop, whose sandboxes hold 2 GiB each; \"\" warms every template in use)")
	f.StringVar(&r.cfg.SandboxBinary, "sandbox-binary", envOr("COVE_SANDBOX_BINARY", server.BesideSelf("cove-sandbox")), "the init-and-agent binary sandboxes start from, faster than cove itself (COVE_SANDBOX_BINARY; default: cove-sandbox beside cove, if there; \"\" for cove)")
	f.StringVar(&r.cfg.DefaultIsolation, "default-isolation", envOr("COVE_DEFAULT_ISOLATION", "namespaces"), "driver of sandboxes that ask for none: namespaces, gvisor or microvm (COVE_DEFAULT_ISOLATION); a sandbox chooses with the metadata cove.isolation")
	f.StringVar(&r.cfg.Runsc, "runsc", os.Getenv("COVE_RUNSC"), "gVisor's runsc for the gvisor driver (COVE_RUNSC; default: runsc beside cove, else from PATH)")
	f.StringVar(&r.cfg.PrepareDrivers, "prepare-drivers", os.Getenv("COVE_PREPARE_DRIVERS"), "a shell command that prepares what missing drivers need (runsc, QEMU, the guests' kernel), run in the background once the node serves, told which are missing in COVE_PREPARE_MISSING; meanwhile a create asking for one is told it is being prepared, with the command's last line of output, and once it ends they join; its stderr goes to <data-dir>/prepare.log (COVE_PREPARE_DRIVERS; make run passes scripts/prepare-drivers.sh)")
	f.StringVar(&r.cfg.QEMU, "qemu", os.Getenv("COVE_QEMU"), "qemu-system-x86_64 for the microvm driver (COVE_QEMU; default: from PATH)")
	f.StringVar(&r.cfg.GuestKernel, "guest-kernel", os.Getenv("COVE_GUEST_KERNEL"), "directory of the microvm guests' kernel: boot/vmlinuz-*, its lib/modules and, when there, boot/vmlinux-*, its ELF, which guests boot instead (COVE_GUEST_KERNEL; default: "+microvm.DefaultKernelDir+", which make deps fills)")
	f.BoolVar(&r.cfg.MicroVMBindImages, "microvm-bind-images", envOr("COVE_MICROVM_BIND_IMAGES", "true") == "true", "give microVM guests the host directories their template binds (the base template's /usr) as disk images of them, made in the background at the first such guest and again when the directory changes, so that those guests can be paused with their memory and forked with their processes; an image takes disk in the data directory, about 60 % of the directory's size (COVE_MICROVM_BIND_IMAGES); false: virtiofs only")
	f.BoolVar(&r.cfg.MicroVMBootSnapshots, "microvm-boot-snapshots", envOr("COVE_MICROVM_BOOT_SNAPSHOTS", "true") == "true", "start microVM guests from a snapshot of their template's guest, taken once it booted (at the first create of the template and limits), instead of booting each: their memory is that snapshot's, shared copy-on-write; they start about 4 times faster and keep a quarter of the memory (COVE_MICROVM_BOOT_SNAPSHOTS; false: every guest boots); guests that share a directory over virtiofs boot")
	f.StringVar(&r.cfg.LXCFS, "lxcfs", envOr("COVE_LXCFS", "/var/lib/lxcfs"), "where lxcfs is mounted (or is started, when installed) so sandboxes' /proc/meminfo, cpuinfo and stat tell their own limits; off goes without (COVE_LXCFS)")
	f.DurationVar(&r.cfg.PauseToDiskAfter, "pause-to-disk-after", 10*time.Minute, "how long a sandbox paused with its memory keeps it in RAM before it is written to disk (gVisor sandboxes, and microVM guests that share no host directory over virtiofs: see --microvm-bind-images; 0: never)")
	f.Float64Var(&r.cfg.Admission.MemoryOvercommit, "memory-overcommit", envFloat("COVE_MEMORY_OVERCOMMIT", node.DefaultMemoryOvercommit), "how many times the host's memory the sandboxes' memory limits may add up to; a create past it is refused as the node being full (COVE_MEMORY_OVERCOMMIT)")
	f.BoolVar(&r.userNS, "userns", envOr("COVE_USERNS", "true") == "true", "run each namespaces sandbox in a user namespace with host ids of its own (COVE_USERNS); false: sandbox root and users are the host's")
}

// metrics is the flag of every serving role: its Prometheus metrics.
func (r *runFlags) metrics(f *pflag.FlagSet) {
	f.StringVar(&r.cfg.MetricsListen, "metrics-listen", os.Getenv("COVE_METRICS_LISTEN"), "serve Prometheus metrics at /metrics on this address, without a token: bind it where only the scraper reaches (COVE_METRICS_LISTEN; default: none)")
}

// recipes are the flags of the built-in templates' builds, which cove
// server and a cluster's nodes run.
func (r *runFlags) recipes(f *pflag.FlagSet) {
	f.StringVar(&r.cfg.Debootstrap, "debootstrap", os.Getenv("COVE_DEBOOTSTRAP"), "the debootstrap program that builds the built-in debian templates (COVE_DEBOOTSTRAP; default: from PATH)")
	f.StringVar(&r.cfg.DebianMirror, "debian-mirror", os.Getenv("COVE_DEBIAN_MIRROR"), "the Debian archive the built-in templates are built from (COVE_DEBIAN_MIRROR; default: the first one the host's apt sources name)")
}

// base is the flag of what the name base serves: every role of a cluster
// must agree.
func (r *runFlags) base(f *pflag.FlagSet) {
	f.StringVar(&r.cfg.Base, "base", envOr("COVE_BASE", server.BaseDebian), "what the template base is: debian (E2B's base — Python 3.11, Node, npm, yarn, build tools, git, curl, sudo, user — built from Debian's archive in the background, the same on every node; the host's template until it is ready, and host after) or host (the host's /usr, read-only: instant, whatever the host holds) (COVE_BASE)")
}

// teams are the team quota flags: cove server's and a node's cap what a
// team's sandboxes hold on the node, a cluster's API replicas (PostgreSQL
// counting) over all its nodes.
func (r *runFlags) teams(f *pflag.FlagSet) {
	f.IntVar(&r.cfg.Admission.Team.Sandboxes, "team-max-sandboxes", envInt("COVE_TEAM_MAX_SANDBOXES", 0), "sandboxes one team may run at once (COVE_TEAM_MAX_SANDBOXES; 0: no cap)")
	f.IntVar(&r.cfg.Admission.Team.CPUs, "team-max-cpus", envInt("COVE_TEAM_MAX_CPUS", 0), "CPUs one team's sandboxes may hold together (COVE_TEAM_MAX_CPUS; 0: no cap)")
	f.Int64Var(&r.cfg.Admission.Team.MemoryMB, "team-max-memory-mb", int64(envInt("COVE_TEAM_MAX_MEMORY_MB", 0)), "memory (MiB) one team's sandboxes may hold together (COVE_TEAM_MAX_MEMORY_MB; 0: no cap)")
	f.Int64Var(&r.cfg.Admission.Team.DiskMB, "team-max-disk-mb", int64(envInt("COVE_TEAM_MAX_DISK_MB", 0)), "disk (MiB) one team's sandboxes may hold together (COVE_TEAM_MAX_DISK_MB; 0: no cap)")
}

// cluster are the flags of a cluster's roles (node, api).
func (r *runFlags) cluster(f *pflag.FlagSet) {
	f.StringVar(&r.cfg.NodeToken, "node-token", os.Getenv("COVE_NODE_TOKEN"), "the secret API replicas present to nodes, the same on all of them, 32 characters or more (COVE_NODE_TOKEN)")
	f.StringVar(&r.cfg.NodeTLSCert, "node-tls-cert", os.Getenv("COVE_NODE_TLS_CERT"), "this role's certificate (PEM) for the node API's TLS; with --node-tls-key and --node-tls-ca, nodes serve HTTPS and accept only replicas presenting a certificate of that CA, and replicas check the nodes' (COVE_NODE_TLS_CERT)")
	f.StringVar(&r.cfg.NodeTLSKey, "node-tls-key", os.Getenv("COVE_NODE_TLS_KEY"), "the key of --node-tls-cert (PEM; COVE_NODE_TLS_KEY)")
	f.StringVar(&r.cfg.NodeTLSCA, "node-tls-ca", os.Getenv("COVE_NODE_TLS_CA"), "the CA (PEM) that signed every role's node API certificate (COVE_NODE_TLS_CA)")
	f.StringVar(&r.cfg.NodeTLSServerName, "node-tls-server-name", os.Getenv("COVE_NODE_TLS_SERVER_NAME"), "the name a replica checks nodes' certificates for (COVE_NODE_TLS_SERVER_NAME; default: the host of each node's URL)")
	f.StringVar(&r.cfg.ObjectStore, "object-store", os.Getenv("COVE_OBJECT_STORE"), "the S3-compatible bucket the nodes share templates through, http(s)://host[:port]/bucket[/prefix], the same on every api and node; its keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (COVE_OBJECT_STORE; none: the cluster builds no templates)")
}

// run is a role command's RunE: the flags made into its configuration,
// then the role.
func (r *runFlags) run(role func(context.Context, server.Config, *slog.Logger) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, log, err := r.finish(cmd)
		if err != nil {
			return err
		}
		return role(cmd.Context(), cfg, log)
	}
}

// finish turns the flags into the role's configuration and logger.
func (r *runFlags) finish(cmd *cobra.Command) (server.Config, *slog.Logger, error) {
	level := slog.LevelInfo
	if r.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := r.cfg
	if u := cfg.Unauthenticated; u.Total < 1 || u.PerSource < 1 || u.Wait <= 0 {
		return cfg, nil, fmt.Errorf("--unauthenticated-max %d, --unauthenticated-per-address %d, --unauthenticated-wait %s: each must be above 0", u.Total, u.PerSource, u.Wait)
	}
	cfg.APIKeys = []string{r.apiKey}
	cfg.ObjectStoreCredentials = objstore.Credentials{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}
	switch _, _, err := net.SplitHostPort(cfg.Domain); {
	case cfg.TLSListen == "off":
		cfg.TLSListen = ""
	case cfg.TLSListen == "" && cfg.Domain != "" && err != nil:
		cfg.TLSListen = ":443" // a domain of its own: E2B's domain mode
	}
	if r.netOn {
		rng, err := netip.ParsePrefix(r.netRange)
		if err != nil {
			return cfg, nil, fmt.Errorf("--network-range %q: %w", r.netRange, err)
		}
		cfg.Network = &network.Config{Range: rng, Flows: r.flows}
		for _, a := range r.egressNS {
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				return cfg, nil, fmt.Errorf("--egress-nameserver %q: want an IP address and port: %w", a, err)
			}
			cfg.Network.NameServers = append(cfg.Network.NameServers, ap)
		}
		if r.upCA != "" {
			if cfg.Network.UpstreamRoots, err = upstreamRoots(r.upCA); err != nil {
				return cfg, nil, err
			}
		}
		for _, a := range r.netAllow {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return cfg, nil, fmt.Errorf("--network-allow %q: want a CIDR: %w", a, err)
			}
			cfg.Network.Allow = append(cfg.Network.Allow, p)
		}
	}
	for _, a := range r.hookAllow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return cfg, nil, fmt.Errorf("--webhook-allow %q: want a CIDR: %w", a, err)
		}
		cfg.WebhookAllow = append(cfg.WebhookAllow, p)
	}
	for _, a := range r.regAllow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return cfg, nil, fmt.Errorf("--registry-allow %q: want a CIDR: %w", a, err)
		}
		cfg.RegistryAllow = append(cfg.RegistryAllow, p)
	}
	cfg.NoUserNamespaces = !r.userNS
	cfg.Out = cmd.OutOrStdout()
	return cfg, log, nil
}

func serverCmd() *cobra.Command {
	var r runFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run Cove on this host: the E2B-compatible API, the sandbox proxy and a node",
		Long: `Run Cove on this host: the E2B-compatible REST API and the sandbox proxy on one
address, sandboxes on this machine, state in SQLite under the data directory.

Point the official E2B SDK at it with:
  E2B_API_URL=http://<listen>  E2B_SANDBOX_URL=http://<listen>  E2B_API_KEY=<key>
and, for the volumes' content API, E2B_VOLUME_API_URL=http://<listen>

Every flag can also be set through its environment variable.`,
		Args: cobra.NoArgs,
		RunE: r.run(server.Run),
	}
	f := cmd.Flags()
	r.common(f, "127.0.0.1:3000", "address for the API and the sandbox proxy")
	r.api(f)
	r.sandboxes(f)
	r.metrics(f)
	r.teams(f)
	f.BoolVar(&r.cfg.LocalImages, "local-images", envOr("COVE_LOCAL_IMAGES", "false") == "true", "let template builds read images from this machine's disk: oci:DIR, docker-archive:FILE (COVE_LOCAL_IMAGES)")
	r.recipes(f)
	r.base(f)
	f.BoolVar(&r.cfg.PrepareTemplates, "prepare-templates", envOr("COVE_PREPARE_TEMPLATES", "true") == "true", "build the built-in templates debian and code-interpreter-v1 in the background from the server's start, when debootstrap is installed, rather than at their first use (COVE_PREPARE_TEMPLATES; cove template list shows how far)")
	f.Int64Var(&r.cfg.VolumeSizeMB, "volume-size", 1024, "size of a new volume in MiB (an ext4 image on the data directory's disk)")
	f.IntVar(&r.cfg.MaxTeamVolumes, "team-max-volumes", envInt("COVE_TEAM_MAX_VOLUMES", volume.DefaultMaxPerTeam), "volumes one team may keep (each holds a loop device, a mount and its image's disk; COVE_TEAM_MAX_VOLUMES)")
	f.Int64Var(&r.cfg.Admission.Team.StorageMB, "team-max-storage-mb", int64(envInt("COVE_TEAM_MAX_STORAGE_MB", 0)), "what one team may store, in MiB: its templates' layers and build logs, its uploads for COPY steps and its volumes; a build fails at the step that would pass it, and a build, upload or volume started once it is full is refused (COVE_TEAM_MAX_STORAGE_MB; 0: no cap)")
	return cmd
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return v
	}
	return def
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func defaultDataDir() string { return server.DefaultDataDir() }

// envList is the comma-separated list in the variable name: def when it is
// not set, none when it is set empty.
func envList(name string, def []string) []string {
	v, ok := os.LookupEnv(name)
	switch {
	case !ok:
		return def
	case v == "":
		return nil
	}
	return strings.Split(v, ",")
}

// upstreamRoots are the host's roots and the CAs in the PEM file path.
func upstreamRoots(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--upstream-ca: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--upstream-ca %s: no PEM certificate in it", path)
	}
	return roots, nil
}
