package node

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/phase"
	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/tokens"
)

// Create makes a sandbox and returns once its agent is initialized and
// ready: a warm one from the template's pool when there is one, else a new
// one. A failed or cancelled create leaves nothing behind.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Info, error) {
	start := time.Now()
	ctx = phase.Start(ctx, m.phases(), "create")
	if req.Template == "" {
		req.Template = "base"
	}
	if req.Timeout <= 0 {
		return Info{}, errs.New(errs.InvalidArgument, "timeout must be greater than 0")
	}
	if req.Timeout > m.cfg.MaxTimeout {
		return Info{}, errs.New(errs.InvalidArgument, "timeout cannot be greater than %s", m.cfg.MaxTimeout)
	}
	if req.DeriveTokens && len(m.cfg.Secret) == 0 {
		return Info{}, errs.New(errs.InvalidArgument, "this node derives no tokens: it was started without the cluster's secret")
	}
	if err := m.checkTokens(req); err != nil {
		return Info{}, err
	}
	var tpl template.Template
	switch {
	case req.Resolved != nil:
		tpl = *req.Resolved
	case req.BuildID != "":
		var err error
		if tpl, err = m.templates.ResolveBuild(ctx, req.Template, req.BuildID); err != nil {
			return Info{}, err
		}
	default:
		var err error
		if tpl, err = m.templates.Resolve(ctx, req.Team, req.Template); err != nil {
			return Info{}, err
		}
	}
	if req.Layers != nil {
		tpl.RootFS.Layers = slices.Clone(req.Layers)
	}
	if req.Saved != nil {
		tpl.RootFS.Layers = append(slices.Clone(tpl.RootFS.Layers), m.templates.LayerPath(req.Saved.Name))
		tpl.Saved = req.Saved
	}
	if req.Image == nil {
		req.Image = tpl.Image // a snapshot's processes
	}
	if tpl.Saved != nil {
		// A snapshot's files are checked before a sandbox stacks them.
		if err := m.templates.VerifyLayer(*tpl.Saved); err != nil {
			m.log.Error("saved layer refused", "template", tpl.ID, logx.Err(err))
			return Info{}, err
		}
	}
	vols, err := m.volumeBinds(req.Volumes)
	if err != nil {
		return Info{}, err
	}
	req.Volumes = vols
	if req.Sized {
		if err := checkSize(req.Limits, tpl, m.templateLimits(tpl)); err != nil {
			return Info{}, err
		}
	}
	limits := withDefaults(req.Limits, m.templateLimits(tpl))
	if err := limits.Validate(); err != nil {
		return Info{}, err
	}
	limits, err = m.cfg.Admission.fit(limits)
	if err != nil {
		return Info{}, err
	}
	if err := m.checkAdmission(req.Team, req.Quota, limits); err != nil {
		return Info{}, err
	}
	if req.Isolation == "" {
		req.Isolation = tpl.Isolation
	}
	d, err := m.driverNamed(req.Isolation)
	if err != nil {
		return Info{}, err
	}
	phase.Mark(ctx, "admit")
	// Warm sandboxes are the default driver's.
	if req.ID == "" && req.Resolved == nil && tpl.Saved == nil && req.Image == nil && len(req.Volumes) == 0 && m.pool != nil && d == m.driver {
		if w := m.pool.take(tpl, limits); w != nil {
			info, err := m.handOut(ctx, w, req)
			phase.Mark(ctx, "handover")
			if err == nil {
				m.observe(func(o Observer) { o.Created(time.Since(start), info.Isolation, true) })
				return info, nil
			}
			m.log.Warn("warm sandbox refused its hand-out; creating one", logx.SandboxID(w.info.ID), logx.Err(err))
		}
		if !m.pool.cold[tpl.ID] {
			m.observe(func(o Observer) { o.WarmMissed(tpl.ID) })
			m.pool.want(tpl)
		}
	}
	if req.ID == "" {
		req.ID = NewID()
	}
	first := Info{ID: req.ID, TemplateID: tpl.ID, BuildID: tpl.BuildID, Isolation: d.Name(), State: StateCreating, Limits: limits,
		Layers: tpl.RootFS.Layers, Volumes: req.Volumes}
	onto(req, &first, tpl.Env, m.cfg.Secret, time.Now().UTC())
	sb := &sandbox{team: req.Team, limits: limits, driver: d, ended: make(chan struct{}), info: first}
	m.mu.Lock()
	if _, ok := m.sandboxes[req.ID]; ok {
		m.mu.Unlock()
		return Info{}, errs.New(errs.AlreadyExists, "sandbox %s already exists", req.ID)
	}
	if err := m.admitLocked(req.Team, req.Quota, limits); err != nil { // again: others may have come in meanwhile
		m.mu.Unlock()
		return Info{}, err
	}
	m.sandboxes[req.ID] = sb
	m.mu.Unlock()

	info := sb.snapshot()
	n, err := m.launch(ctx, &info, tpl, askedNetwork(req), false, req.Image)
	if err == nil {
		err = m.admit(sb, &info, n, m.agentFor(info.ID))
		phase.Mark(ctx, "record")
	}
	if err != nil {
		m.mu.Lock()
		delete(m.sandboxes, req.ID)
		m.mu.Unlock()
		return Info{}, err
	}
	killFailed := func(err error, what string) (Info, error) {
		cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if kerr := m.Kill(cleanup, info.ID); kerr != nil {
			m.log.Error("kill sandbox whose "+what+" failed", logx.SandboxID(info.ID), logx.Err(kerr))
		}
		return Info{}, err
	}
	if err := m.trustEgressCA(ctx, m.agentOf(info.ID), info.Network); err != nil {
		return killFailed(err, "egress CA")
	}
	if tpl.StartCmd != "" && req.Image == nil { // a clone's processes run already
		if err := startCommand(ctx, m.agentOf(info.ID), tpl); err != nil {
			return killFailed(err, "start command")
		}
		phase.Mark(ctx, "start_command")
	}
	m.observe(func(o Observer) { o.Created(time.Since(start), info.Isolation, false) })
	return info, nil
}

// phases is where the phases of the node's operations go: the observer,
// when there is one.
func (m *Manager) phases() phase.Recorder {
	if m.cfg.Observer == nil {
		return nil
	}
	return m.cfg.Observer
}

// observe tells the observer, when there is one.
func (m *Manager) observe(f func(Observer)) {
	if m.cfg.Observer != nil {
		f(m.cfg.Observer)
	}
}

// templateLimits are a template's limits, the node's where it sets none.
func (m *Manager) templateLimits(tpl template.Template) isolation.Limits {
	l := m.cfg.DefaultLimits
	if tpl.CPUCount > 0 {
		l.CPUMillis = int64(tpl.CPUCount) * 1000
	}
	if tpl.MemoryMB > 0 {
		l.MemoryMB = int64(tpl.MemoryMB)
	}
	l.CPUMillis = min(l.CPUMillis, int64(m.cfg.Admission.CPUs)*1000)
	return l
}

// startReadyLimit bounds the wait for a template's ready command.
const startReadyLimit = 5 * time.Minute

// startCommand starts the template's start command in the background and
// waits until its ready command exits 0 (E2B runs these once at build
// time and snapshots the running processes; without memory snapshots
// every sandbox runs them as it starts).
func startCommand(ctx context.Context, agent *agentclient.Client, tpl template.Template) error {
	var res agentclient.Result
	discard := func(_, _ []byte) {}
	start := agentclient.Command{Cmd: "/bin/sh", Args: []string{"-c", tpl.StartCmd}, Background: true}
	if err := agent.Exec(ctx, start, discard, &res); err != nil {
		return fmt.Errorf("start command of template %s: %w", tpl.ID, err)
	}
	if tpl.ReadyCmd == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, startReadyLimit)
	defer cancel()
	ready := agentclient.Command{Cmd: "/bin/sh", Args: []string{"-c", tpl.ReadyCmd}}
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		res = agentclient.Result{}
		if err := agent.Exec(ctx, ready, discard, &res); err == nil && res.ExitCode == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return errs.New(errs.Unavailable, "template %s: the ready command %q did not pass: %v", tpl.ID, tpl.ReadyCmd, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// withCPUs adds OMP_NUM_THREADS, the sandbox's CPUs, to its variables
// unless they set it: nproc answers it, and OpenMP, BLAS and the pools
// that follow it size themselves by it, as in a VM of that many vCPUs
// (sched_getaffinity, which nproc reads otherwise, names the host's).
func withCPUs(vars map[string]string, l isolation.Limits) map[string]string {
	if _, ok := vars["OMP_NUM_THREADS"]; ok || l.CPUMillis <= 0 {
		return vars
	}
	out := maps.Clone(vars)
	if out == nil {
		out = map[string]string{}
	}
	out["OMP_NUM_THREADS"] = strconv.FormatInt((l.CPUMillis+999)/1000, 10)
	return out
}

// launch starts a sandbox for info over tpl: its network from the pool
// (with want's rules), the driver's create with the agent's settings. It
// fills info's handle and network; on failure nothing is left.
//
// With img, the sandbox's processes are not started but cloned from that
// copy of another's (Manager.clone), and its agent is told who it is.
func (m *Manager) launch(ctx context.Context, info *Info, tpl template.Template, want *NetworkInfo, background bool, img *template.ProcessImage) (*network.Net, error) {
	env := map[string]string{"E2B_SANDBOX_ID": info.ID, "E2B_TEMPLATE_ID": info.TemplateID}
	rootfs := tpl.RootFS
	for _, v := range info.Volumes {
		rootfs.Binds = append(slices.Clone(rootfs.Binds), v.Bind)
	}
	spec := isolation.Spec{RootFS: rootfs, Limits: info.Limits, Env: env, Background: background, Agent: isolation.AgentSettings{
		EnvVars: withCPUs(info.EnvVars, info.Limits), AccessToken: info.AccessToken, DefaultUser: tpl.DefaultUser, DefaultWorkdir: tpl.DefaultWorkdir,
	}}
	var n *network.Net
	if nets := m.cfg.Networks; nets != nil {
		var err error
		if n, err = nets.Acquire(ctx, want.Internet); err != nil {
			return nil, fmt.Errorf("network for sandbox %s: %w", info.ID, err)
		}
		if err := applyRules(ctx, nets, n, want, info.Team, info.ID); err != nil {
			nets.Release(n)
			return nil, fmt.Errorf("egress rules of sandbox %s: %w", info.ID, err)
		}
		spec.NetNS = n.NS
		for _, d := range m.resolvers(want) {
			spec.DNS = append(spec.DNS, d.String())
		}
		ni := *want
		ni.Slot, ni.Addr = n.Slot, n.Addr.String()
		info.Network = &ni
		phase.Mark(ctx, "network")
	}
	d, err := m.driverNamed(info.Isolation)
	if err != nil {
		if n != nil {
			m.cfg.Networks.Release(n)
		}
		return nil, err
	}
	info.Isolation = d.Name()
	var h isolation.Handle
	if img != nil {
		h, err = m.clone(ctx, d, info, spec, img)
	} else {
		h, err = d.Create(ctx, info.ID, spec)
	}
	phase.Mark(ctx, "driver")
	if err != nil {
		if n != nil {
			m.cfg.Networks.Release(n)
		}
		return nil, fmt.Errorf("create sandbox %s: %w", info.ID, err)
	}
	info.Handle = h
	if img != nil {
		if err := reidentify(ctx, d, info.ID, img, spec); err != nil {
			m.destroy(info.ID, n)
			return nil, err
		}
	}
	return n, nil
}

// admit makes a started sandbox a running member of the table: its record
// on disk, its timeout timer and its exit watcher. On failure the sandbox
// is destroyed.
func (m *Manager) admit(sb *sandbox, info *Info, n *network.Net, agent *agentclient.Client) error {
	agent.SetToken(info.AccessToken)
	if err := m.recordAs(info, StateRunning, info.Rest); err != nil {
		agent.Close()
		m.destroy(info.ID, n)
		m.removeRecord(info.ID)
		return fmt.Errorf("record sandbox %s: %w", info.ID, err)
	}
	sb.mu.Lock()
	sb.info = *info
	sb.agent = agent
	sb.net = n
	sb.timer = time.AfterFunc(time.Until(info.EndAt), func() { m.expire(info.ID) })
	sb.mu.Unlock()
	m.watch(sb)
	m.log.Info("sandbox created", logx.SandboxID(info.ID), "template", info.TemplateID)
	return nil
}

// destroy tears down a sandbox that never joined the table (or is leaving
// it) and gives its network back.
func (m *Manager) destroy(id string, n *network.Net) {
	cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.driverOf(id).Destroy(cleanup, id); err != nil {
		m.log.Error("destroy sandbox", logx.SandboxID(id), logx.Err(err))
		return
	}
	if n != nil {
		m.cfg.Networks.Release(n)
	}
}

// withDefaults fills the limits a request left at zero.
// checkSize refuses a size asked for (l's CPUs and memory; 0: the
// template's) past what the template allows: its maxCpuCount and
// maxMemoryMB, else its own size (def, its limits).
func checkSize(l isolation.Limits, tpl template.Template, def isolation.Limits) error {
	maxCPU, maxMem := cmp.Or(tpl.MaxCPUCount, int((def.CPUMillis+999)/1000)), cmp.Or(tpl.MaxMemoryMB, int(def.MemoryMB))
	if maxCPU > 0 && l.CPUMillis > int64(maxCPU)*1000 {
		return errs.New(errs.InvalidArgument, "cpuCount %d: template %s allows at most %d (its maxCpuCount)", (l.CPUMillis+999)/1000, tpl.ID, maxCPU)
	}
	if maxMem > 0 && l.MemoryMB > int64(maxMem) {
		return errs.New(errs.InvalidArgument, "memoryMB %d: template %s allows at most %d (its maxMemoryMB)", l.MemoryMB, tpl.ID, maxMem)
	}
	return nil
}

func withDefaults(l, def isolation.Limits) isolation.Limits {
	if l.CPUMillis == 0 {
		l.CPUMillis = def.CPUMillis
	}
	if l.MemoryMB == 0 {
		l.MemoryMB = def.MemoryMB
	}
	if l.DiskMB == 0 {
		l.DiskMB = def.DiskMB
	}
	if l.PIDs == 0 {
		l.PIDs = def.PIDs
	}
	return l
}

// onto sets on info what a create asks of the sandbox it gets, started for
// it or handed out warm (one place for both): its team, life from now,
// metadata, variables over the template's (tplEnv), tokens (derived from
// secret when asked), ports' settings and pause settings. TestOnto lists
// the request's other fields and where they go.
func onto(r CreateRequest, info *Info, tplEnv map[string]string, secret []byte, now time.Time) {
	info.Team = r.Team
	info.StartedAt, info.EndAt, info.Timeout = now, now.Add(r.Timeout), r.Timeout
	info.Metadata = maps.Clone(r.Metadata)
	info.EnvVars = maps.Clone(tplEnv)
	if info.EnvVars == nil {
		info.EnvVars = map[string]string{}
	}
	maps.Copy(info.EnvVars, r.EnvVars)
	info.AccessToken, info.TrafficToken = r.AccessToken, r.TrafficToken
	if r.DeriveTokens {
		info.AccessToken, info.TrafficToken = tokens.Sandbox(secret, info.ID, r.Secure, r.PublicTraffic)
	}
	info.Settings = r.Settings
}

// askedNetwork is the network a create asks for.
func askedNetwork(r CreateRequest) *NetworkInfo {
	return &NetworkInfo{Internet: !r.NoInternet, AllowOut: r.AllowOut, DenyOut: r.DenyOut, AllowDomains: r.AllowDomains, Rules: r.Rules, EgressProxy: r.EgressProxy, Tokens: r.Tokens,
		DNSServers: r.DNSServers}
}

// resolvers are the nameservers a sandbox's network names: its own
// (E2B's dnsServers), else the node's.
func (m *Manager) resolvers(ni *NetworkInfo) []netip.Addr {
	if ni != nil && len(ni.DNSServers) > 0 {
		return ni.DNSServers
	}
	if m.cfg.Networks == nil {
		return nil
	}
	return m.cfg.Networks.DNS()
}

// setResolvers writes a running sandbox's /etc/resolv.conf through its
// agent: the nameservers ni names.
func (m *Manager) setResolvers(ctx context.Context, agent *agentclient.Client, ni *NetworkInfo) error {
	var servers []string
	for _, a := range m.resolvers(ni) {
		servers = append(servers, a.String())
	}
	if len(servers) == 0 || agent == nil {
		return nil
	}
	if err := agent.Init(ctx, envd.InitRequest{Resolvers: servers}); err != nil {
		return fmt.Errorf("resolvers of sandbox: %w", err)
	}
	return nil
}

// checkTokens checks a create's workload tokens: well formed, each one
// its rules name there, and a node that mints them.
func (m *Manager) checkTokens(req CreateRequest) error {
	if err := svid.CheckTokens(req.Tokens); err != nil {
		return err
	}
	if err := network.CheckTokenRefs(req.Rules, req.Tokens); err != nil {
		return err
	}
	if len(req.DNSServers) > 0 && m.cfg.Networks == nil {
		return errs.New(errs.Unimplemented, "dnsServers: this node gives sandboxes no network of their own (--network=false)")
	}
	if len(req.Tokens) > 0 && (m.cfg.Networks == nil || !m.cfg.Networks.MintsTokens()) {
		return errs.New(errs.Unimplemented, "iam: this node mints no workload identity tokens (its operator gave no identity key, --identity-key-file)")
	}
	return nil
}

// applyRules installs a network's own egress rules, if it has any; the
// secrets its transforms name are team's, the tokens sandbox id's, and
// what it holds in the egress proxy, now or after an update, counts in
// team's share.
func applyRules(ctx context.Context, nets Networks, n *network.Net, ni *NetworkInfo, team, id string) error {
	nets.SetTeam(n, team)
	if len(ni.AllowOut) > 0 || len(ni.DenyOut) > 0 {
		if err := nets.SetRules(n, ni.AllowOut, ni.DenyOut); err != nil {
			return err
		}
	}
	if len(ni.AllowDomains) > 0 {
		if err := nets.SetDomains(n, ni.AllowDomains); err != nil {
			return err
		}
	}
	if len(ni.Rules) > 0 {
		if err := nets.SetTransforms(n, network.Workload{Team: team, Sandbox: id, Tokens: ni.Tokens}, ni.Rules); err != nil {
			return err
		}
	}
	if ni.EgressProxy != nil {
		return nets.SetEgressProxy(ctx, n, ni.EgressProxy)
	}
	return nil
}

// trustEgressCA has a sandbox whose rules transform requests trust the
// node's egress CA (the proxy's certificates for those names); it writes
// the sandbox's files, so a boot from them has it still, and a later
// call replaces another node's.
func (m *Manager) trustEgressCA(ctx context.Context, agent *agentclient.Client, ni *NetworkInfo) error {
	if ni == nil || len(ni.Rules) == 0 || m.cfg.Networks == nil || agent == nil {
		return nil
	}
	if err := agent.Init(ctx, envd.InitRequest{EgressCA: string(m.cfg.Networks.EgressCA())}); err != nil {
		return fmt.Errorf("trust the egress CA: %w", err)
	}
	return nil
}

// volumeBinds binds each volume a create mounts, named by id, from the
// node's own store: what reaches the node names no host path.
func (m *Manager) volumeBinds(mounts []VolumeMount) ([]VolumeMount, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	if m.cfg.Volumes == nil {
		return nil, errs.New(errs.Unimplemented, "volumeMounts: this node keeps no volumes")
	}
	out := slices.Clone(mounts)
	for i, v := range out {
		dir, err := m.cfg.Volumes.Locate(v.ID)
		if err != nil {
			return nil, errs.New(errs.InvalidArgument, "volumeMounts: %v", err)
		}
		out[i].Bind = isolation.Bind{Source: dir, Target: v.Path, Writable: true}
	}
	return out, nil
}
