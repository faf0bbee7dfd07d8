package cluster

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/nodeapi"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
)

// callTimeout bounds the calls whose callers give no context.
const callTimeout = 30 * time.Second

// orphanAge is how old a sandbox a node runs without a record must be
// before a replica kills it: younger, its record may be on its way (a
// create in flight on another replica).
const orphanAge = time.Minute

// candidate is a node a create may go to.
type candidate struct {
	id     string
	client *nodeapi.Client
}

// candidates are the live nodes that offer isolation ("" = any), the
// first best for a sandbox of template ("" = none): fewest sandboxes
// less a warm sandbox's or the template's layers' bonus (member.rank),
// then most memory left, then most CPU not promised; equals in a random
// order, so that replicas placing at once do not all pick the same one.
func (c *Cluster) candidates(isolation, template string) []candidate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ms []*member
	for _, m := range c.nodes {
		if isolation == "" || slices.Contains(m.Drivers, isolation) {
			ms = append(ms, m)
		}
	}
	rand.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	slices.SortStableFunc(ms, func(a, b *member) int {
		_, af := a.load()
		_, bf := b.load()
		return cmp.Or(cmp.Compare(a.rank(template), b.rank(template)), cmp.Compare(bf, af), cmp.Compare(b.freeCPU(), a.freeCPU()))
	})
	out := make([]candidate, len(ms))
	for i, m := range ms {
		out[i] = candidate{m.ID, m.client}
	}
	return out
}

// placed counts a sandbox on a node until a heartbeat does, so that the
// next create spreads.
func (c *Cluster) placed(nodeID string, memoryMB int64, template string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.nodes[nodeID]; m != nil {
		m.placed = append(m.placed, placement{time.Now(), memoryMB, template})
	}
}

// Create places a sandbox: on the least loaded live node that offers its
// isolation, else the next (a full or unreachable node is passed over;
// any other refusal is the request's and is returned).
func (c *Cluster) Create(ctx context.Context, req sandboxes.CreateRequest) (sandboxes.Info, error) {
	tpl := ""
	if c.cfg.TemplateID != nil {
		tpl = c.cfg.TemplateID(req.Team, req.Template)
	}
	cands := c.candidates(req.Isolation, tpl)
	if req.Node != "" { // what it starts from is there
		cands = slices.DeleteFunc(cands, func(m candidate) bool { return m.id != req.Node })
		if len(cands) == 0 {
			return sandboxes.Info{}, errs.New(errs.Unavailable, "node %s, which holds what the sandbox starts from, is not available", req.Node)
		}
	}
	if len(cands) == 0 {
		if req.Isolation != "" {
			return sandboxes.Info{}, errs.WithHint(errs.New(errs.Unavailable, "no node of the cluster is available with isolation %q", req.Isolation), errs.Hint{Code: errs.CodeNoCompatibleNode})
		}
		return sandboxes.Info{}, errs.Retryable(errs.New(errs.Unavailable, "no node of the cluster is available"), time.Second, errs.CodeCapacity)
	}
	var why []string
	for _, m := range cands {
		info, err := m.client.Create(ctx, req)
		if err == nil {
			info.Node = m.id
			c.learn(info)
			c.placed(m.id, info.Limits.MemoryMB, tpl)
			return info, nil
		}
		if !errs.Is(err, errs.Unavailable) && !errs.Is(err, errs.ResourceExhausted) || ctx.Err() != nil {
			return sandboxes.Info{}, err
		}
		why = append(why, m.id+": "+err.Error())
	}
	return sandboxes.Info{}, errs.New(errs.Unavailable, "no node of the cluster could take the sandbox: %s", strings.Join(why, "; "))
}

// Get returns a sandbox from its node.
func (c *Cluster) Get(ctx context.Context, id string) (sandboxes.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	info, err := routed(ctx, c, id, func(n *nodeapi.Client, r route) (sandboxes.Info, error) {
		info, err := n.Get(ctx, id)
		info.Node = r.node
		return info, err
	})
	if err != nil {
		// Its node lost (this replica may not know yet): paused, its
		// files shared, it is on no node.
		if info, ok := c.orphaned(ctx, id); ok {
			c.learn(info)
			return info, nil
		}
		return sandboxes.Info{}, err
	}
	c.learn(info)
	return info, nil
}

// List returns every live node's sandboxes (a node that does not answer
// adds none); it fails only when ctx ends first.
func (c *Cluster) List(ctx context.Context) ([]sandboxes.Info, error) {
	ask, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	list := fromEachNode(ask, c, "list", func(n *nodeapi.Client) ([]sandboxes.Info, error) { return n.List(ask) },
		func(info *sandboxes.Info, id string) { info.Node = id })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return list, nil
}

// fromEachNode asks every live node at once and joins their answers,
// each marked with its node by mark (a node that does not answer adds
// none).
func fromEachNode[T any](ctx context.Context, c *Cluster, what string, ask func(*nodeapi.Client) ([]T, error), mark func(*T, string)) []T {
	c.mu.Lock()
	nodes := make([]candidate, 0, len(c.nodes))
	for _, m := range c.nodes {
		nodes = append(nodes, candidate{m.ID, m.client})
	}
	c.mu.Unlock()
	lists := make([][]T, len(nodes))
	var wg sync.WaitGroup
	for i, m := range nodes {
		wg.Go(func() {
			got, err := ask(m.client)
			if err != nil {
				c.log.Debug("a node did not answer", "node", m.id, "call", what, logx.Err(err))
				return
			}
			for j := range got {
				mark(&got[j], m.id)
			}
			lists[i] = got
		})
	}
	wg.Wait()
	return slices.Concat(lists...)
}

// routed runs f against the node of sandbox id. A route this replica
// kept may be stale: another replica may have moved the sandbox (taken
// it over from a node lost before this replica heard) or ended it. When
// f fails through a kept route, the record is read again: a sandbox on
// another node now is asked there, once; one whose record is gone is
// not found.
func routed[T any](ctx context.Context, c *Cluster, id string, f func(*nodeapi.Client, route) (T, error)) (T, error) {
	client, r, kept, err := c.lookup(ctx, id)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := f(client, r)
	if err == nil || !kept || !c.moved(ctx, id, r.node) {
		return out, err
	}
	if client, r, _, err = c.lookup(ctx, id); err != nil {
		return out, err
	}
	return f(client, r)
}

// Kill ends a sandbox on its node.
func (c *Cluster) Kill(ctx context.Context, id string) error {
	_, err := routed(ctx, c, id, func(n *nodeapi.Client, _ route) (struct{}, error) { return struct{}{}, n.Kill(ctx, id) })
	c.forget(id)
	return err
}

// SetTimeout makes a sandbox end timeout from now.
func (c *Cluster) SetTimeout(ctx context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	return routed(ctx, c, id, func(n *nodeapi.Client, _ route) (sandboxes.Info, error) { return n.SetTimeout(ctx, id, timeout) })
}

// ExtendTimeout moves a sandbox's end to at least timeout from now.
func (c *Cluster) ExtendTimeout(ctx context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	return routed(ctx, c, id, func(n *nodeapi.Client, _ route) (sandboxes.Info, error) { return n.ExtendTimeout(ctx, id, timeout) })
}

// AgentLog returns the end of a sandbox's agent log.
func (c *Cluster) AgentLog(ctx context.Context, id string) ([]byte, error) {
	return routed(ctx, c, id, func(n *nodeapi.Client, _ route) ([]byte, error) { return n.AgentLog(ctx, id) })
}

// Stats returns a sandbox's resource use.
func (c *Cluster) Stats(ctx context.Context, id string) (isolation.Stats, error) {
	return routed(ctx, c, id, func(n *nodeapi.Client, _ route) (isolation.Stats, error) { return n.Stats(ctx, id) })
}

// UpdateNetwork changes a sandbox's egress.
func (c *Cluster) UpdateNetwork(ctx context.Context, id string, u sandboxes.NetworkUpdate) error {
	_, err := routed(ctx, c, id, func(n *nodeapi.Client, _ route) (struct{}, error) { return struct{}{}, n.UpdateNetwork(ctx, id, u) })
	return err
}

// stateChange runs a pause or resume on the sandbox's node and keeps
// what it made of it.
func (c *Cluster) stateChange(ctx context.Context, id string, f func(*nodeapi.Client) (sandboxes.Info, error)) (sandboxes.Info, error) {
	return routed(ctx, c, id, func(client *nodeapi.Client, r route) (sandboxes.Info, error) {
		c.setRunning(id, false) // whatever comes of it, ask the node next time
		info, err := f(client)
		if err == nil {
			info.Node = r.node
			c.learn(info)
			c.keepPausedState(ctx, info)
		}
		return info, err
	})
}

// Pause pauses a sandbox with its memory; strict refuses one whose agent
// does not answer.
func (c *Cluster) Pause(ctx context.Context, id string, strict bool) (sandboxes.Info, error) {
	return c.pause(ctx, id, func(n *nodeapi.Client) (sandboxes.Info, error) { return n.Pause(ctx, id, strict) })
}

// PauseFiles pauses a sandbox keeping its files only.
func (c *Cluster) PauseFiles(ctx context.Context, id string) (sandboxes.Info, error) {
	return c.pause(ctx, id, func(n *nodeapi.Client) (sandboxes.Info, error) { return n.PauseFiles(ctx, id) })
}

// pause runs a pause on the sandbox's node; one whose node is lost is
// paused already (a Conflict, as on its node).
func (c *Cluster) pause(ctx context.Context, id string, f func(*nodeapi.Client) (sandboxes.Info, error)) (sandboxes.Info, error) {
	info, err := c.stateChange(ctx, id, f)
	if err != nil && (errs.Is(err, errs.NotFound) || errs.Is(err, errs.Unavailable)) {
		if _, ok := c.orphaned(ctx, id); ok {
			return sandboxes.Info{}, errs.New(errs.Conflict, "sandbox %s is already paused", id)
		}
	}
	return info, err
}

// Resume resumes a paused sandbox: on its node, or on another that takes
// it over when its node is lost.
func (c *Cluster) Resume(ctx context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	return c.pausedChange(ctx, id, func(n *nodeapi.Client) (sandboxes.Info, error) { return n.Resume(ctx, id, timeout) })
}

// Resize resizes a paused sandbox on its node, or on another that takes
// it over when its node is lost (as Resume: the resume follows there).
func (c *Cluster) Resize(ctx context.Context, id string, l isolation.Limits, quota *sandboxes.TeamQuota) (sandboxes.Info, error) {
	return c.pausedChange(ctx, id, func(n *nodeapi.Client) (sandboxes.Info, error) { return n.Resize(ctx, id, l, quota) })
}

// pausedChange makes change to a paused sandbox on its node, or, when
// that node is lost, on another that takes the sandbox over first.
func (c *Cluster) pausedChange(ctx context.Context, id string, change func(*nodeapi.Client) (sandboxes.Info, error)) (sandboxes.Info, error) {
	info, err := c.stateChange(ctx, id, change)
	if err == nil || !errs.Is(err, errs.NotFound) && !errs.Is(err, errs.Unavailable) {
		return info, err
	}
	orphan, ok := c.orphaned(ctx, id)
	if !ok {
		return info, err
	}
	if err := c.takeOver(ctx, orphan); err != nil {
		return sandboxes.Info{}, err
	}
	return c.stateChange(ctx, id, change)
}

// setRunning notes whether a sandbox with a known route runs.
func (c *Cluster) setRunning(id string, running bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.routes[id]; ok && r.known {
		r.running = running
		c.routes[id] = r
	}
}

// SaveLayer copies a sandbox's files (and processes) on its node, where
// they stay until the copy's Release: what starts from it is created on
// that node (CreateRequest.Node).
func (c *Cluster) SaveLayer(ctx context.Context, id string, memory bool) (sandboxes.Copy, error) {
	return c.saveLayer(ctx, id, func(n *nodeapi.Client) (sandboxes.Copy, error) { return n.SaveLayer(ctx, id, memory) })
}

// ShareLayer copies a sandbox's files (and, with memory, processes) on
// its node, which pushes them to the object store with the layers under
// them: any node can start from the copy (a snapshot).
func (c *Cluster) ShareLayer(ctx context.Context, id string, memory bool) (sandboxes.Copy, error) {
	return c.saveLayer(ctx, id, func(n *nodeapi.Client) (sandboxes.Copy, error) { return n.ShareLayer(ctx, id, memory) })
}

func (c *Cluster) saveLayer(ctx context.Context, id string, save func(*nodeapi.Client) (sandboxes.Copy, error)) (sandboxes.Copy, error) {
	return routed(ctx, c, id, func(client *nodeapi.Client, r route) (sandboxes.Copy, error) {
		cp, err := save(client)
		cp.Info.Node = r.node
		return cp, err
	})
}

// Wake reports whether a sandbox runs, resuming it when it is paused with
// auto-resume (the proxy's step once the request's credential is checked).
// One seen running is taken to run without asking its node: one that was
// paused meanwhile is woken at the dial (Dial), one that ended fails there.
func (c *Cluster) Wake(ctx context.Context, id string) bool {
	_, err := routed(ctx, c, id, func(client *nodeapi.Client, r route) (struct{}, error) {
		// (One its node lost is paused without its memory: traffic does
		// not wake those, connect does.)
		if !(r.known && r.running) && !client.Wake(ctx, id) {
			return struct{}{}, errs.New(errs.NotFound, "sandbox %s is not running", id)
		}
		return struct{}{}, nil
	})
	if err != nil {
		return false
	}
	c.setRunning(id, true)
	return true
}

// Dial connects to a port inside a sandbox through its node.
func (c *Cluster) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	return routed(ctx, c, id, func(client *nodeapi.Client, r route) (net.Conn, error) {
		conn, err := client.Dial(ctx, id, port)
		if errs.Is(err, errs.NotFound) && r.running {
			// Seen running, it was paused since (this replica had not
			// heard yet, and its Wake asked no node): the proxy checked
			// the request's credential, so wake it as Wake would have,
			// once.
			c.setRunning(id, false)
			if client.Wake(ctx, id) {
				c.setRunning(id, true)
				conn, err = client.Dial(ctx, id, port)
			}
		}
		if err != nil {
			return nil, err
		}
		nc := &nodeConn{Conn: conn, c: c, node: r.node}
		c.mu.Lock()
		defer c.mu.Unlock()
		m := c.nodes[r.node]
		if m == nil { // it left meanwhile
			conn.Close()
			return nil, errs.New(errs.Unavailable, "sandbox %s's node %s left the cluster", id, r.node)
		}
		m.conns[nc] = struct{}{}
		return nc, nil
	})
}

// known is a sandbox's route with what the proxy asks, from its node the
// first time.
func (c *Cluster) known(id string) (route, bool) {
	c.mu.Lock()
	r, ok := c.routes[id]
	c.mu.Unlock()
	if ok && r.known {
		return r, true
	}
	// The proxy's questions carry no context: the node's answer is
	// bounded by callTimeout alone.
	if _, err := c.Get(context.Background(), id); err != nil {
		return route{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok = c.routes[id]
	return r, ok && r.known
}

// TrafficToken is the token a sandbox's ports require ("" = public).
func (c *Cluster) TrafficToken(id string) string {
	r, _ := c.known(id)
	return r.traffic
}

// AccessToken is the token a sandbox's agent requires ("" = none).
func (c *Cluster) AccessToken(id string) string {
	r, _ := c.known(id)
	return r.access
}

// Running reports whether a sandbox runs, as last seen, waking nothing.
func (c *Cluster) Running(id string) bool {
	r, ok := c.known(id)
	return ok && r.running
}

// PortRoute is the Host header traffic to a sandbox's port gets, and
// whether the port serves HTTPS.
func (c *Cluster) PortRoute(id string, port int) (string, bool) {
	r, _ := c.known(id)
	return sandboxes.MaskHost(r.maskRequest, port), slices.Contains(r.httpsPorts, port)
}

// AgentTransport: a replica has no pool of its own to sandboxes' agents;
// the proxy dials them through their nodes.
func (c *Cluster) AgentTransport(string) (http.RoundTripper, bool) { return nil, false }

// catchUp settles what a replica missed of a node it follows anew:
// records of sandboxes the node no longer runs end; sandboxes it runs
// without a record (a replica that failed between the node's create and
// the record) are killed once old enough.
func (c *Cluster) catchUp(ctx context.Context, nodeID string, client *nodeapi.Client) {
	// Records first: a record is written after its sandbox started, so
	// every sandbox recorded by now is in the node's list unless it ended.
	recorded, err := c.members.SandboxesOn(ctx, nodeID)
	if err != nil {
		c.log.Warn("list the sandboxes recorded on a node", "node", nodeID, logx.Err(err))
		return
	}
	running, err := client.List(ctx)
	if err != nil {
		c.log.Warn("list a node's sandboxes", "node", nodeID, logx.Err(err))
		return
	}
	runs := map[string]bool{}
	for _, info := range running {
		runs[info.ID] = true
	}
	for _, id := range recorded {
		if runs[id] {
			continue
		}
		c.forget(id)
		if state, err := c.members.PausedState(ctx, id); err == nil && len(state) > 0 {
			// Paused, its files shared: another node takes it over (a
			// takeover cut short left it recorded here).
			if _, err := c.members.MoveSandbox(ctx, id, nodeID, ""); err != nil {
				c.log.Warn("release a paused sandbox its node lacks", logx.SandboxID(id), logx.Err(err))
			}
			continue
		}
		if c.cfg.Ended != nil {
			c.cfg.Ended(id, isolation.Exit{Reason: isolation.ExitDestroyed, Detail: "ended while its node was out of reach"})
		}
	}
	for _, info := range running {
		if slices.Contains(recorded, info.ID) || info.ForBuild() || time.Since(info.StartedAt) < orphanAge {
			continue
		}
		if err := client.Kill(ctx, info.ID); err != nil && !errs.Is(err, errs.NotFound) {
			c.log.Warn("kill a sandbox no replica recorded", "node", nodeID, logx.SandboxID(info.ID), logx.Err(err))
			continue
		}
		c.log.Info("killed a sandbox no replica recorded", "node", nodeID, logx.SandboxID(info.ID))
	}
}

// Builder runs template builds on the cluster's nodes.
type Builder struct {
	c       *Cluster
	builtOn func(templateID string) string
}

// Builder is the cluster as the template service's builder; builtOn names
// the node that built a template last ("" for none), which has its steps
// cached.
func (c *Cluster) Builder(builtOn func(templateID string) string) Builder {
	return Builder{c, builtOn}
}

// Run runs a build, its log passed to logf, on the node that built the
// template last when it is live, else on the least loaded live node.
func (b Builder) Run(ctx context.Context, templateID, buildID string, spec template.Spec, logf func(template.LogEntry)) error {
	cands := b.c.candidates("", "")
	if len(cands) == 0 {
		return errs.New(errs.Unavailable, "no node of the cluster is available to build")
	}
	on := cands[0]
	if last := b.builtOn(templateID); last != "" {
		if i := slices.IndexFunc(cands, func(c candidate) bool { return c.id == last }); i >= 0 {
			on = cands[i]
		}
	}
	b.c.log.Info("template build placed", "template", templateID, "build", buildID, "node", on.id)
	return on.client.Build(ctx, templateID, buildID, spec, logf)
}

// CanBuild accepts every spec: a node refuses in the build's log what it
// cannot build.
func (Builder) CanBuild(template.Spec) error { return nil }

// Sample returns every live node's running sandboxes with their use now,
// one call per node, at once (a node that does not answer adds none).
func (c *Cluster) Sample(ctx context.Context) []sandboxes.Sample {
	return fromEachNode(ctx, c, "sample", func(n *nodeapi.Client) ([]sandboxes.Sample, error) { return n.Sample(ctx) },
		func(s *sandboxes.Sample, id string) { s.Info.Node = id })
}
