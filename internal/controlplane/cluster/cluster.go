// Package cluster is an API replica's view of a cluster's nodes (cove
// api): membership from the database the nodes heartbeat into, placement
// of creates, and every other call routed to the node that runs the
// sandbox, through the node-internal API. It serves the service as its
// node and the proxy as its sandboxes.
package cluster

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/nodeapi"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Config configures an API replica's view of the cluster.
type Config struct {
	// Token is the node token every node API call carries.
	Token string
	// Lease is how long a node may go without a heartbeat before it is
	// lost: its sandboxes are then gone for the API (default 8 s).
	Lease time.Duration
	// Refresh is how often the membership is read (default 1 s).
	Refresh time.Duration
	// HTTP carries the node API calls (default: a client whose
	// connections give up within 2 s, with TLS when set: a client given
	// here must carry TLS itself).
	HTTP *http.Client
	// TLS, when set, is the replica's side of the node API's TLS: its
	// certificate and the CA the nodes' are checked against.
	TLS *tls.Config
	// TemplateID, when set, names the template a create's reference
	// (name, name:tag or id) is of, for placement (its warm sandboxes and
	// cached layers); "" when unknown.
	TemplateID func(team, ref string) string
	// Ended and StateChanged receive what the nodes report (the service's
	// Ended and StateChanged).
	Ended        func(id string, exit isolation.Exit)
	StateChanged func(info sandboxes.Info)
}

// Cluster is safe for concurrent use.
type Cluster struct {
	cfg     Config
	members store.Members
	records store.Store
	log     *slog.Logger

	mu     sync.Mutex
	nodes  map[string]*member // live nodes by id
	routes map[string]route   // sandbox id → where it runs
}

var _ sandboxes.Node = (*Cluster)(nil)

// member is a live node: its last report and its API.
type member struct {
	store.Member
	client   *nodeapi.Client
	unfollow context.CancelFunc // its events' follower
	// conns are the byte streams open through it (Dial): closed when it
	// leaves, so that nothing waits on a node that is gone (or on a copy
	// of a sandbox another node took over).
	conns map[*nodeConn]struct{}
	// placed are this replica's creates on it that its last heartbeat
	// may not count yet.
	placed []placement
}

// placement is a create this replica made on a node (of template, whose
// warm sandbox there it may have taken).
type placement struct {
	at       time.Time
	memoryMB int64
	template string
}

// beatSlack is how much older than a heartbeat a placement must be for
// the heartbeat to count it: the node samples its load just before.
const beatSlack = time.Second

// leave stops following the node and closes the streams open through it
// (c.mu held).
func (m *member) leave() {
	m.unfollow()
	for nc := range m.conns {
		nc.Conn.Close()
	}
	clear(m.conns)
}

// nodeConn is a byte stream to a sandbox's port through a node.
type nodeConn struct {
	net.Conn
	c    *Cluster
	node string
}

// Close closes the stream and forgets it.
func (nc *nodeConn) Close() error {
	nc.c.mu.Lock()
	if m := nc.c.nodes[nc.node]; m != nil {
		delete(m.conns, nc)
	}
	nc.c.mu.Unlock()
	return nc.Conn.Close()
}

// CloseWrite half-closes the stream, as the node's does.
func (nc *nodeConn) CloseWrite() error {
	if cw, ok := nc.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// report takes a node's new heartbeat and drops the placements it counts.
func (m *member) report(r store.Member, now time.Time) {
	m.Member = r
	sampled := now.Add(-r.Age - beatSlack)
	m.placed = slices.DeleteFunc(m.placed, func(p placement) bool { return p.at.Before(sampled) })
}

// Warm sandboxes and cached layers draw a template's creates to a node
// while it runs no more than these many sandboxes over the least loaded.
const (
	warmBonus   = 2
	cachedBonus = 1
)

// rank orders nodes for a create of template ("" for none): the
// sandboxes it runs, less a bonus when it has a warm sandbox of the
// template ready (its heartbeat's, less those this replica took since)
// or the template's layers.
func (m *member) rank(template string) int {
	sandboxes, _ := m.load()
	if template == "" {
		return sandboxes
	}
	warm := m.Warm[template]
	for _, p := range m.placed {
		if p.template == template {
			warm--
		}
	}
	switch {
	case warm > 0:
		return sandboxes - warmBonus
	case slices.Contains(m.Cached, template):
		return sandboxes - cachedBonus
	}
	return sandboxes
}

// freeCPU is the CPU (millis) its last heartbeat had not promised.
func (m *member) freeCPU() int64 { return int64(m.CPUs)*1000 - m.CommittedCPUMillis }

// load is the node's sandboxes and free memory as this replica sees them:
// its heartbeat's plus the creates made here since.
func (m *member) load() (sandboxes int, freeMB int64) {
	sandboxes, freeMB = m.Sandboxes, m.MemoryMB-m.CommittedMemoryMB
	for _, p := range m.placed {
		sandboxes++
		freeMB -= p.memoryMB
	}
	return sandboxes, freeMB
}

// route is what a replica keeps of a sandbox: its node and what the proxy
// asks of every request (fixed for the sandbox's life).
type route struct {
	node        string
	known       bool // traffic, mask and running are filled in
	traffic     string
	access      string
	maskRequest string
	httpsPorts  []int
	// running, as last seen (a create, a get, a pause or resume through
	// this replica, the node's events): the proxy's wake asks the node
	// only when it is not.
	running bool
}

// New returns a replica's view; Run keeps it current. records are the
// sandboxes' (each names its node), members the cluster's membership.
func New(cfg Config, records store.Store, members store.Members, log *slog.Logger) *Cluster {
	if cfg.Lease <= 0 {
		cfg.Lease = 8 * time.Second
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	if cfg.HTTP == nil {
		// A node whose host is gone answers nothing: a connection attempt
		// gives up well within the lease rather than hang a request.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		t.TLSClientConfig = cfg.TLS
		cfg.HTTP = &http.Client{Transport: t}
	}
	return &Cluster{cfg: cfg, members: members, records: records, log: log,
		nodes: map[string]*member{}, routes: map[string]route{}}
}

// Run reads the membership every Refresh until ctx ends: new nodes are
// followed, lost ones dropped with their sandboxes.
func (c *Cluster) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Refresh)
	defer t.Stop()
	for {
		if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("read the cluster's nodes", logx.Err(err))
		}
		select {
		case <-ctx.Done():
			c.mu.Lock()
			for _, m := range c.nodes {
				m.leave()
			}
			c.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// Refresh reads the membership once (Run does it every Refresh).
func (c *Cluster) Refresh(ctx context.Context) error {
	ms, err := c.members.Members(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, m := range ms {
		if m.Age >= c.cfg.Lease {
			// Lost (now, or before this replica started): its sandboxes
			// are gone for the API. Idempotent across replicas.
			ids, err := c.members.ForgetSandboxesOn(ctx, m.ID)
			if err != nil {
				return err
			}
			c.forgetNode(m.ID)
			if len(ids) > 0 {
				c.log.Warn("node lost: its sandboxes are gone", "node", m.ID, "silent", m.Age.Round(time.Millisecond), "sandboxes", len(ids))
			}
			continue
		}
		live[m.ID] = true
		c.join(ctx, m)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, m := range c.nodes {
		if !live[id] {
			m.leave()
			delete(c.nodes, id)
			c.log.Warn("node left the cluster", "node", id)
		}
	}
	return nil
}

// join follows a live node, new or known (its report refreshed).
func (c *Cluster) join(ctx context.Context, m store.Member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.nodes[m.ID]; ok && cur.URL == m.URL {
		cur.report(m, time.Now())
		return
	} else if ok {
		cur.leave() // moved: followed anew at its new address
	}
	client, err := nodeapi.NewClient(m.URL, c.cfg.Token, c.cfg.HTTP, c.cfg.TLS)
	if err != nil {
		c.log.Error("a node reports an address that cannot be used", "node", m.ID, "url", m.URL, logx.Err(err))
		return
	}
	fctx, stop := context.WithCancel(ctx)
	c.nodes[m.ID] = &member{Member: m, client: client, unfollow: stop, conns: map[*nodeConn]struct{}{}}
	go client.Follow(fctx, func() { c.catchUp(fctx, m.ID, client) }, func(ev nodeapi.Event) { c.event(m.ID, ev) }, c.log)
	c.log.Info("node joined the cluster", "node", m.ID, "url", m.URL)
}

// event passes a node's event on.
func (c *Cluster) event(nodeID string, ev nodeapi.Event) {
	ev.Info.Node = nodeID
	if ev.Info.ForBuild() {
		return
	}
	if ev.Ended {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if sb, err := c.records.Sandbox(ctx, ev.Info.ID); err == nil && sb.Node != nodeID {
			// A copy this node kept of a sandbox another took over.
			c.log.Info("a node ended its copy of a sandbox recorded elsewhere", "node", nodeID, logx.SandboxID(ev.Info.ID), "recorded", sb.Node)
			return
		}
		c.forget(ev.Info.ID)
		if c.cfg.Ended != nil {
			c.cfg.Ended(ev.Info.ID, ev.Info.Exit)
		}
		return
	}
	c.learn(ev.Info)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	c.keepPausedState(ctx, ev.Info)
	cancel()
	if c.cfg.StateChanged != nil {
		c.cfg.StateChanged(ev.Info)
	}
}

// forget drops a sandbox's route.
func (c *Cluster) forget(id string) {
	c.mu.Lock()
	delete(c.routes, id)
	c.mu.Unlock()
}

// forgetNode drops the routes to a lost node: its sandboxes are gone, or
// another node takes them over.
func (c *Cluster) forgetNode(nodeID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, r := range c.routes {
		if r.node == nodeID {
			delete(c.routes, id)
		}
	}
}

// client is the API of a live node.
func (c *Cluster) client(nodeID string) *nodeapi.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.nodes[nodeID]; m != nil {
		return m.client
	}
	return nil
}

// lookup finds where sandbox id runs: a live node's API, and its route.
// kept says the route is one this replica kept, which may be stale
// (routed). A route to a node not live is read again from the record
// (its sandbox may have been taken over by another node since).
func (c *Cluster) lookup(ctx context.Context, id string) (client *nodeapi.Client, r route, kept bool, err error) {
	c.mu.Lock()
	r, ok := c.routes[id]
	c.mu.Unlock()
	if ok {
		if client := c.client(r.node); client != nil {
			return client, r, true, nil
		}
	}
	sb, err := c.records.Sandbox(ctx, id)
	if err != nil {
		return nil, route{}, false, err
	}
	if !ok || r.node != sb.Node {
		r = route{node: sb.Node}
	}
	client = c.client(r.node)
	if client == nil {
		return nil, r, false, errs.New(errs.NotFound, "sandbox %s not found: its node %q is not in the cluster", id, r.node)
	}
	c.mu.Lock()
	c.routes[id] = r
	c.mu.Unlock()
	return client, r, false, nil
}

// moved reports whether sandbox id's record no longer names nodeID (or
// is gone), and then forgets its route.
func (c *Cluster) moved(ctx context.Context, id, nodeID string) bool {
	sb, err := c.records.Sandbox(ctx, id)
	if err == nil && sb.Node == nodeID || err != nil && !errs.Is(err, errs.NotFound) {
		return false
	}
	c.forget(id)
	return true
}

// learn keeps what the proxy asks of a sandbox, from its info.
func (c *Cluster) learn(info sandboxes.Info) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.routes[info.ID] = route{node: info.Node, known: true, traffic: info.TrafficToken, access: info.AccessToken, maskRequest: info.MaskRequestHost,
		httpsPorts: info.HTTPSPorts, running: info.State == sandboxes.StateRunning}
}

// SandboxRanges are the live nodes' sandbox address ranges, as they
// report them: what no request made for a tenant may reach.
func (c *Cluster) SandboxRanges() []netip.Prefix {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []netip.Prefix
	for _, m := range c.nodes {
		if p, err := netip.ParsePrefix(m.SandboxRange); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Warmed is how many warm sandboxes of a template the live node with the
// fewest has, as their last heartbeats said (0 with no node).
func (c *Cluster) Warmed(templateID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	fewest := -1
	for _, m := range c.nodes {
		if n := m.Warm[templateID]; fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return max(fewest, 0)
}
