package node

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/phase"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/tokens"
)

// pool keeps warm sandboxes per template: started with the template's
// limits, variables and start command, on a network with internet access
// and no rules, with an agent that has no token yet. Create hands one out
// (rules, token and the request's variables applied then) and the pool
// makes another in the background. A warm sandbox is never in the table,
// never recorded (a restarted node destroys it as a leftover) and never
// reused after its user.
type pool struct {
	m    *Manager
	size int
	cold map[string]bool // templates kept no warm sandboxes of

	mu   sync.Mutex
	tpls map[string]template.Template // kept warm, by template id (latest build)
	warm map[string][]*warmSandbox    // by template id
	// failed are templates whose warm sandboxes failed to start: retried
	// later and later, then given up.
	failed warmFailures
	kick   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup
}

type warmSandbox struct {
	info  Info
	tpl   template.Template
	net   *network.Net
	agent *agentclient.Client
}

func newPool(m *Manager, size int, cold []string) *pool {
	p := &pool{m: m, size: size, cold: map[string]bool{}, tpls: map[string]template.Template{}, warm: map[string][]*warmSandbox{}, failed: warmFailures{},
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	for _, id := range cold {
		if id != "" {
			p.cold[id] = true
		}
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

// Warm keeps sandboxes of a template warm from now on (a node warms base
// once it has recovered; a template joins on its first create).
func (m *Manager) Warm(ctx context.Context, ref string) error {
	if m.pool == nil {
		return nil
	}
	tpl, err := m.templates.Resolve(ctx, "", ref)
	if err != nil {
		return err
	}
	m.pool.want(tpl)
	return nil
}

// Warmed is how many warm sandboxes of a template are ready to hand out.
func (m *Manager) Warmed(templateID string) int {
	if m.pool == nil {
		return 0
	}
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return len(m.pool.warm[templateID])
}

func (p *pool) signal() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// want keeps tpl warm (its latest build: older warm sandboxes go).
func (p *pool) want(tpl template.Template) {
	if p.cold[tpl.ID] {
		return
	}
	p.mu.Lock()
	cur, ok := p.tpls[tpl.ID]
	if !ok || cur.BuildID != tpl.BuildID {
		p.tpls[tpl.ID] = tpl
	}
	p.mu.Unlock()
	p.signal()
}

// take hands out a warm sandbox of tpl's build with these limits, if any.
func (p *pool) take(tpl template.Template, limits isolation.Limits) *warmSandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.warm[tpl.ID]
	for i, w := range list {
		if w.tpl.BuildID == tpl.BuildID && w.info.Limits == limits && !p.outdated(w) {
			p.warm[tpl.ID] = append(list[:i:i], list[i+1:]...)
			p.signal()
			return w
		}
	}
	return nil
}

// outdated reports whether the driver says w is outdated: take passes it
// over, and short replaces it.
func (p *pool) outdated(w *warmSandbox) bool {
	o, ok := p.m.driver.(isolation.Outdater)
	return ok && o.Outdated(w.info.ID)
}

// loop refills the pool, one sandbox at a time, whenever it is short.
func (p *pool) loop() {
	defer p.wg.Done()
	var retry <-chan time.Time // the next retry of a template that failed
	for {
		select {
		case <-p.done:
			return
		case <-p.kick:
		case <-retry:
		}
		p.settle()
		for {
			tpl, ok := p.short()
			if !ok {
				break
			}
			err := p.fill(tpl)
			p.mu.Lock()
			_, hadFailed := p.failed[tpl.ID]
			if err == nil {
				delete(p.failed, tpl.ID)
				p.mu.Unlock()
				if hadFailed && p.m.cfg.OnWarm != nil {
					p.m.cfg.OnWarm(tpl.ID, tpl.BuildID, nil)
				}
				continue
			}
			gaveUp := p.failed.fail(tpl.ID, tpl.BuildID, err, time.Now())
			p.mu.Unlock()
			if p.m.cfg.OnWarm != nil {
				p.m.cfg.OnWarm(tpl.ID, tpl.BuildID, err)
			}
			if gaveUp {
				p.m.log.Error("stopped warming a template whose sandboxes fail to start", "template", tpl.ID, "build", tpl.BuildID, "failures", warmGiveUp, logx.Err(err))
			} else {
				p.m.log.Warn("warm a sandbox", "template", tpl.ID, logx.Err(err))
			}
		}
		p.mu.Lock()
		next := p.failed.next()
		p.mu.Unlock()
		retry = nil
		if !next.IsZero() {
			retry = time.After(time.Until(next))
		}
	}
}

// refillDelay is how long a pool that is at least half full waits after
// its last hand-over before it refills: the sandbox just handed out runs
// its first commands without its replacement's start-up beside it (a new
// sandbox is ≈ 15 ms of CPU, on two cores here).
const refillDelay = 250 * time.Millisecond

// settle waits while the pool is at least half full and hand-overs keep
// coming; a pool below half refills at once.
func (p *pool) settle() {
	for !p.low() {
		select {
		case <-p.done:
			return
		case <-p.kick:
		case <-time.After(refillDelay):
			return
		}
	}
}

// low reports whether a template kept warm has less than half the pool.
func (p *pool) low() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.tpls {
		if 2*len(p.warm[id]) < p.size {
			return true
		}
	}
	return false
}

// short returns a template with fewer warm sandboxes than the pool's size
// and not held back by failed starts, first dropping warm sandboxes of
// builds or templates that are gone, and outdated ones.
func (p *pool) short() (template.Template, bool) {
	p.mu.Lock()
	ids := make([]string, 0, len(p.tpls))
	for id := range p.tpls {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		tpl, err := p.m.templates.ResolveID(context.Background(), id) // by id: base stays the host's
		p.mu.Lock()
		switch {
		case errs.Is(err, errs.NotFound):
			delete(p.tpls, id)
		case err == nil && tpl.BuildID != p.tpls[id].BuildID:
			p.tpls[id] = tpl
		}
		var stale []*warmSandbox
		keep := p.warm[id][:0]
		for _, w := range p.warm[id] {
			if cur, ok := p.tpls[id]; ok && w.tpl.BuildID == cur.BuildID && !p.outdated(w) {
				keep = append(keep, w)
			} else {
				stale = append(stale, w)
			}
		}
		p.warm[id] = keep
		p.mu.Unlock()
		for _, w := range stale {
			p.discard(w)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for id, tpl := range p.tpls {
		if len(p.warm[id]) < p.size && p.failed.ready(id, tpl.BuildID, now) {
			return tpl, true
		}
	}
	return template.Template{}, false
}

// fill makes one warm sandbox of tpl.
func (p *pool) fill(tpl template.Template) error {
	m := p.m
	ctx, cancel := context.WithTimeout(phase.Start(context.Background(), m.phases(), "warm"), 2*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	info := Info{ID: NewID(), TemplateID: tpl.ID, BuildID: tpl.BuildID, State: StateCreating, Limits: m.templateLimits(tpl),
		Layers: tpl.RootFS.Layers, EnvVars: maps.Clone(tpl.Env)}
	if m.cfg.Secret != nil {
		info.AccessToken, _ = tokens.Sandbox(m.cfg.Secret, info.ID, true, true) // secure while warm
	}
	// Made at a low CPU priority: sandboxes in use come first.
	n, err := m.launch(ctx, &info, tpl, &NetworkInfo{Internet: true}, true, nil)
	if err != nil {
		return err
	}
	w := &warmSandbox{info: info, tpl: tpl, net: n, agent: m.agentFor(info.ID)}
	w.agent.SetToken(info.AccessToken)
	if err := warmUp(ctx, w.agent); err != nil {
		p.discard(w)
		return err
	}
	phase.Mark(ctx, "first_command")
	if tpl.StartCmd != "" { // its processes are up before anyone asks
		if err := startCommand(ctx, w.agent, tpl); err != nil {
			p.discard(w)
			return err
		}
	}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		p.discard(w)
		return nil
	default:
	}
	p.warm[tpl.ID] = append(p.warm[tpl.ID], w)
	p.mu.Unlock()
	return nil
}

// warmUp sends a warm sandbox's agent one command while nobody waits, so
// that its first costs (the process service's set-up, the spawn path, the
// fork) are paid here, not by the user's first command: a command that
// forks but never runs. Its argument is longer than the kernel takes
// (MAX_ARG_STRLEN, 128 KiB), so its exec fails before the program is
// loaded. A process that ran would enter the sandbox's time namespace,
// whose clocks its hand-over must still be able to set
// (isolation.HandOverer), and a sandbox's uptime would count from the
// pool. gVisor's kernel refuses it too (ENAMETOOLONG); one that took it
// would run `true`. The agent answers a failed start with InvalidArgument;
// any other error is the agent's.
func warmUp(ctx context.Context, agent *agentclient.Client) error {
	var res agentclient.Result
	long := strings.Repeat("x", 128<<10+1)
	err := agent.Exec(ctx, agentclient.Command{Cmd: "/bin/bash", Args: []string{"-c", "true", long}}, func(_, _ []byte) {}, &res)
	if err != nil && connect.CodeOf(err) != connect.CodeInvalidArgument {
		return fmt.Errorf("warm up the agent: %w", err)
	}
	return nil
}

func (p *pool) discard(w *warmSandbox) {
	w.agent.Close()
	p.m.destroy(w.info.ID, w.net)
}

// layersInUse adds the warm sandboxes' layers.
// ready counts the warm sandboxes ready, by template id.
func (p *pool) ready() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for id, ws := range p.warm {
		if len(ws) > 0 {
			out[id] = len(ws)
		}
	}
	return out
}

func (p *pool) layersInUse(out map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range p.warm {
		for _, w := range list {
			for _, l := range w.info.Layers {
				out[l] = true
			}
		}
	}
}

// close stops refilling and destroys the warm sandboxes.
func (p *pool) close() {
	close(p.done)
	p.wg.Wait()
	p.mu.Lock()
	var all []*warmSandbox
	for _, list := range p.warm {
		all = append(all, list...)
	}
	p.warm = map[string][]*warmSandbox{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.discard(w) }()
	}
	wg.Wait()
}

// handOut gives a warm sandbox to the request: its timeout, metadata,
// variables, tokens and network rules, then it joins the table.
func (m *Manager) handOut(ctx context.Context, w *warmSandbox, req CreateRequest) (Info, error) {
	info := w.info
	onto(req, &info, w.tpl.Env, m.cfg.Secret, time.Now().UTC())
	sb := &sandbox{team: info.Team, limits: info.Limits, driver: m.driver, ended: make(chan struct{}), info: info} // warm sandboxes are the default driver's
	m.mu.Lock()
	if err := m.admitLocked(req.Team, req.Quota, info.Limits); err != nil {
		m.mu.Unlock()
		w.agent.Close()
		m.destroy(info.ID, w.net)
		return Info{}, err
	}
	m.sandboxes[info.ID] = sb
	m.mu.Unlock()
	fail := func(err error) (Info, error) {
		m.mu.Lock()
		delete(m.sandboxes, info.ID)
		m.mu.Unlock()
		w.agent.Close()
		m.destroy(info.ID, w.net)
		return Info{}, err
	}
	if nets := m.cfg.Networks; nets != nil && w.net != nil {
		want := *askedNetwork(req)
		if !want.Internet {
			if err := nets.SetInternet(w.net, false); err != nil {
				return fail(err)
			}
		}
		if err := applyRules(ctx, nets, w.net, &want, info.Team, info.ID); err != nil {
			return fail(err)
		}
		want.Slot, want.Addr = w.net.Slot, w.net.Addr.String()
		info.Network = &want
	}
	if h, ok := m.driver.(isolation.HandOverer); ok {
		if err := h.HandOver(ctx, info.ID); err != nil {
			return fail(err)
		}
	}
	// The agent started with the token its user gets (Config.Secret): only
	// another token or variables of the request need a call to it.
	if info.AccessToken != w.info.AccessToken || len(req.EnvVars) > 0 {
		token := info.AccessToken
		if err := w.agent.Init(ctx, envd.InitRequest{EnvVars: req.EnvVars, AccessToken: &token}); err != nil {
			return fail(err)
		}
	}
	if err := m.trustEgressCA(ctx, w.agent, info.Network); err != nil {
		return fail(err)
	}
	if len(req.DNSServers) > 0 { // it started with the node's
		if err := m.setResolvers(ctx, w.agent, info.Network); err != nil {
			return fail(err)
		}
	}
	if err := m.admit(sb, &info, w.net, w.agent); err != nil {
		m.mu.Lock()
		delete(m.sandboxes, info.ID)
		m.mu.Unlock()
		return Info{}, err
	}
	return info, nil
}
