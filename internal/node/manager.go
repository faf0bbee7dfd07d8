// Package node owns the sandboxes of one host: the sandbox table and its
// lifecycle (creating → running ⇄ paused → killed; a paused sandbox's state
// is its memory, its disk or its files: pause.go, spill.go, pause_files.go),
// the reaper that ends (or pauses) sandboxes at their timeout, and Recover
// after the node process restarts.
package node

import (
	"context"

	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/phase"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/volume"
)

// Templates resolves a template reference (id, name or name:tag) and
// stores the layers sandboxes' files are saved in (template.Store).
type Templates interface {
	// Resolve finds a ready build by id, or by a name of team's ("":
	// the built-in templates' names).
	Resolve(ctx context.Context, team, ref string) (template.Template, error)
	// ResolveID finds the ready build a template's default tag points
	// at, by its id alone.
	ResolveID(ctx context.Context, id string) (template.Template, error)
	ResolveBuild(ctx context.Context, templateID, buildID string) (template.Template, error)
	LayerPath(name string) string
	StageLayer() (string, error)
	CommitLayer(stage string, avoid ...string) (template.LayerSum, error)
	MergeLayer(lower, upper string) (string, error)
	VerifyLayer(sum template.LayerSum) error
	Hold() (release func())
	// LetGo lets go of a layer a copy committed once its caller named it
	// or not: it is removed when nothing names or uses it.
	LetGo(name string, inUse func() map[string]bool)
	// FetchLayers fetches the layers the node lacks from the cluster's
	// object store, by their archives' digests.
	FetchLayers(ctx context.Context, layers []string, blobs map[string]string) error
}

// Observer is told of the node's operations as they end well: their
// durations, for metrics.
type Observer interface {
	// Created: a sandbox of driver made in d, pooled when a warm one was
	// handed out.
	Created(d time.Duration, driver string, pooled bool)
	Killed(d time.Duration)
	Paused(d time.Duration, memory bool)
	Resumed(d time.Duration)
	// WarmMissed: a create that a warm sandbox could have served found
	// none of its template ready.
	WarmMissed(templateID string)
	// Transitioned: a sandbox's record went from one phase to another
	// (Transitions).
	Transitioned(from, to Phase)
	// Phase: one phase of an operation (create, warm, kill) took d.
	phase.Recorder
}

// Config configures a Manager.
type Config struct {
	// Dir holds the node's sandbox records.
	Dir string
	// DefaultLimits apply where a request leaves a limit at zero.
	DefaultLimits isolation.Limits
	// MaxTimeout caps a sandbox's lifetime.
	MaxTimeout time.Duration
	// OnEnd, when set, is told of every sandbox that ended (killed, timed
	// out, crashed) once it is cleaned up.
	OnEnd func(Info)
	// OnState, when set, is told when the node itself pauses (a timeout
	// with AutoPause) or resumes (traffic with AutoResume) a sandbox.
	OnState func(Info)
	// Networks, when set, gives every sandbox a network of its own;
	// without it sandboxes have loopback only.
	Networks Networks
	// PoolSize is how many warm sandboxes the node keeps ready per template
	// it has been asked for (0: none).
	PoolSize int
	// ColdTemplates are templates (by id) it keeps no warm sandboxes of,
	// whatever PoolSize says: a create of one starts it.
	ColdTemplates []string
	// Secret, when set, is what sandboxes' tokens derive from (package
	// tokens; the control plane derives the same): a create may ask the
	// node to derive them (CreateRequest.DeriveTokens), and a warm
	// sandbox starts with the agent token its user will get, so a
	// hand-over usually needs no call to the agent.
	Secret []byte
	// Drivers are isolation drivers besides the default one, chosen per
	// sandbox (CreateRequest.Isolation).
	Drivers []isolation.Driver
	// Unavailable names drivers this node lacks, with the reason, so that
	// asking for one says why.
	Unavailable map[string]string
	// Admission is what the node may promise its sandboxes, and each
	// team's share (zero fields: the host's capacity, no team quota).
	Admission Admission
	// SpillAfter, when above 0, is how long a sandbox stays paused with
	// its memory in RAM before the node writes it to disk (drivers with
	// isolation.Checkpointer: gVisor, and microVM guests that share no
	// host directory).
	SpillAfter time.Duration
	// OnWarm, when set, is told whether the last warm sandbox of a build
	// failed to start (its error) or started (nil, after failures).
	OnWarm func(templateID, buildID string, err error)
	// Volumes are the node's volumes, which a create's VolumeMounts name
	// by id (nil: the node keeps none).
	Volumes *volume.Store
	// Observer, when set, is told how long the node's operations take
	// (metrics.Node).
	Observer Observer
	// Share, when set (a cluster's node with an object store), pushes
	// the named layers where every node reaches them and returns their
	// archives' digests: the files of a sandbox paused without its memory
	// are shared so, for another node to resume it if this one is lost.
	Share func(ctx context.Context, layers []string) (map[string]string, error)
}

// Networks hands out sandbox networks (network.Manager).
type Networks interface {
	Acquire(ctx context.Context, internet bool) (*network.Net, error)
	Adopt(slot int, ns *os.File, internet bool) (*network.Net, error)
	Release(n *network.Net)
	SetInternet(n *network.Net, allowed bool) error
	// SetTeam names whose sandbox has the network: its egress proxy
	// connections count in the team's share.
	SetTeam(n *network.Net, team string)
	SetRules(n *network.Net, allow, deny []netip.Prefix) error
	SetDomains(n *network.Net, domains []string) error
	SetTransforms(n *network.Net, w network.Workload, rules network.Rules) error
	SetEgressProxy(ctx context.Context, n *network.Net, e *network.EgressProxy) error
	// EgressCA is the PEM certificate sandboxes with rules trust.
	EgressCA() []byte
	// MintsTokens says whether rules may put workload tokens in requests.
	MintsTokens() bool
	DNS() []netip.Addr
	// CloseFlows closes what a network holds in the egress proxy; Flows
	// counts it.
	CloseFlows(n *network.Net)
	Flows(n *network.Net) int
}

// Manager is the node's sandbox table.
type Manager struct {
	cfg       Config
	driver    isolation.Driver // the default
	templates Templates
	log       *slog.Logger
	usage     *meter // what teams' sandboxes held while running

	pool *pool // nil without warm sandboxes

	// drivers are the node's drivers by name, the default's included,
	// and unavailable the reasons it lacks others (drivers.go): a driver
	// being prepared joins after the node serves (AddDriver).
	drvMu       sync.RWMutex
	drivers     map[string]isolation.Driver
	unavailable map[string]unavailable

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	// recorded is the phase of each sandbox's record on disk, which its
	// next record must leave along a legal transition (writeRecord).
	recMu    sync.Mutex
	recorded map[string]Phase
	wg       sync.WaitGroup
	closing  chan struct{}
}

// New returns a manager over driver. Call Recover before serving.
func New(cfg Config, driver isolation.Driver, templates Templates, log *slog.Logger) (*Manager, error) {
	if cfg.DefaultLimits == (isolation.Limits{}) {
		cfg.DefaultLimits = sandboxes.DefaultLimits
	}
	if cfg.MaxTimeout == 0 {
		cfg.MaxTimeout = 24 * time.Hour
	}
	var err error
	if cfg.Admission, err = cfg.Admission.withDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create node directory: %w", err)
	}
	m := &Manager{cfg: cfg, driver: driver, templates: templates, log: log, usage: newMeter(),
		drivers: map[string]isolation.Driver{driver.Name(): driver}, sandboxes: map[string]*sandbox{}, recorded: map[string]Phase{}, closing: make(chan struct{}),
		unavailable: map[string]unavailable{}}
	for _, d := range cfg.Drivers {
		m.drivers[d.Name()] = d
	}
	for name, why := range cfg.Unavailable {
		m.unavailable[name] = unavailable{why: why}
	}
	if cfg.PoolSize > 0 {
		m.pool = newPool(m, cfg.PoolSize, cfg.ColdTemplates)
	}
	return m, nil
}

// driverOf is the driver running sandbox id (the default's for one the
// table does not hold: warm sandboxes), without the sandbox's lock.
func (m *Manager) driverOf(id string) isolation.Driver {
	if sb := m.lookup(id); sb != nil {
		return sb.driver
	}
	return m.driver
}

// driverCan is d as the optional interface T (isolation.Pauser, …), or
// Unimplemented naming what it cannot do.
func driverCan[T any](d isolation.Driver, what string) (T, error) {
	t, ok := d.(T)
	if !ok {
		return t, errs.New(errs.Unimplemented, "the %s driver cannot %s", d.Name(), what)
	}
	return t, nil
}

// Get returns a sandbox's info.
func (m *Manager) Get(_ context.Context, id string) (Info, error) { return m.get(id) }

// get returns a sandbox's details.
func (m *Manager) get(id string) (Info, error) {
	sb := m.lookup(id)
	if sb == nil {
		return Info{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return sb.snapshot(), nil
}

// List returns every sandbox in the table, oldest first.
func (m *Manager) List(context.Context) ([]Info, error) { return m.list(), nil }

// list returns every sandbox in the table, oldest first.
func (m *Manager) list() []Info {
	m.mu.Lock()
	out := make([]Info, 0, len(m.sandboxes))
	for _, sb := range m.sandboxes {
		out = append(out, sb.snapshot())
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.Before(out[j].StartedAt) })
	return out
}

// Agent returns a client for a running sandbox's agent.
func (m *Manager) Agent(id string) (*agentclient.Client, error) {
	sb := m.lookup(id)
	if sb == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.info.State != StateRunning {
		return nil, errs.New(errs.NotFound, "sandbox %s is %s", id, sb.info.State)
	}
	return sb.agent, nil
}

// Stats returns a running sandbox's resource use, where the driver can tell.
func (m *Manager) Stats(ctx context.Context, id string) (isolation.Stats, error) {
	if _, err := m.Agent(id); err != nil {
		return isolation.Stats{}, err
	}
	st, err := driverCan[isolation.Stater](m.driverOf(id), "report a sandbox's use")
	if err != nil {
		return isolation.Stats{}, err
	}
	stats, err := st.Stats(ctx, id)
	if err != nil {
		return stats, err
	}
	if sb := m.lookup(id); sb != nil && m.cfg.Networks != nil {
		sb.mu.Lock()
		if sb.net != nil {
			stats.EgressConnections = uint64(m.cfg.Networks.Flows(sb.net))
		}
		sb.mu.Unlock()
	}
	return stats, nil
}

// AgentLogMax is how much of an agent's log AgentLog returns: its end.
const AgentLogMax = 1 << 20

// AgentLog returns the end of a sandbox's agent log (JSON lines); a
// driver that keeps none gives an empty one.
func (m *Manager) AgentLog(ctx context.Context, id string) ([]byte, error) {
	if m.lookup(id) == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	l, ok := m.driverOf(id).(isolation.AgentLogger)
	if !ok {
		return nil, nil
	}
	b, err := l.AgentLog(ctx, id, AgentLogMax)
	if errs.Is(err, errs.NotFound) { // paused without its processes
		return nil, nil
	}
	return b, err
}

func (m *Manager) lookup(id string) *sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sandboxes[id]
}

// Close stops the manager's timers and watchers. Sandboxes keep running: a
// restarted node adopts them through Recover.
func (m *Manager) Close() {
	if m.pool != nil {
		m.pool.close() // warm sandboxes have no user: they go
	}
	close(m.closing)
	m.mu.Lock()
	for _, sb := range m.sandboxes {
		sb.mu.Lock()
		if sb.timer != nil {
			sb.timer.Stop()
		}
		sb.mu.Unlock()
		if sb.agent != nil {
			sb.agent.Close()
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
}

// NewID returns a fresh sandbox id: "i" and 19 characters of [a-z0-9].
func NewID() string { return ids.New("i", 19) }

func (m *Manager) recordPath(id string) string { return filepath.Join(m.cfg.Dir, id+".json") }

// writeRecord writes a sandbox's record: every change of its state goes
// through here. It refuses a change of phase Transitions does not list;
// once the record is written, the usage meter takes it and a change of
// phase is logged.
func (m *Manager) writeRecord(info Info) error {
	from, err := m.checkPhase(info)
	if err != nil {
		return err
	}
	if err := fsutil.WriteJSON(m.recordPath(info.ID), info); err != nil {
		return err
	}
	to := info.Phase()
	m.notePhase(info.ID, to)
	m.usage.observe(info, time.Now())
	if from != to {
		m.log.Debug("sandbox phase", logx.SandboxID(info.ID), "from", from, "to", to)
		m.observe(func(o Observer) { o.Transitioned(from, to) })
	}
	return nil
}

func (m *Manager) removeRecord(id string) {
	m.notePhase(id, PhaseNone)
	m.usage.end(id, time.Now())
	if err := os.Remove(m.recordPath(id)); err != nil && !os.IsNotExist(err) {
		m.log.Warn("remove sandbox record", logx.SandboxID(id), logx.Err(err))
	}
}

// agentOf is the agent client of a sandbox in the table (nil if none).
func (m *Manager) agentOf(id string) *agentclient.Client {
	sb := m.lookup(id)
	if sb == nil {
		return nil
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.agent
}

// agentFor builds the agent client of a sandbox.
func (m *Manager) agentFor(id string) *agentclient.Client {
	return agentclient.New(func(ctx context.Context) (net.Conn, error) {
		return m.driverOf(id).Dial(ctx, id, envdwire.Port)
	})
}

// LayersInUse are the template layers of every sandbox in the table, those
// being created included.
func (m *Manager) LayersInUse() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for _, sb := range m.sandboxes {
		info := sb.snapshot()
		for _, l := range info.Layers {
			out[l] = true
		}
		if f := info.Rest.Files; f != nil { // saved, or a shared copy
			for _, l := range f.Template.RootFS.Layers {
				out[l] = true
			}
		}
	}
	if m.pool != nil {
		m.pool.layersInUse(out)
	}
	return out
}
