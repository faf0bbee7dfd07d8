// Package nodefake is a node in memory that runs nothing: the node
// contract (sandboxes.Node) kept by a table, for unit tests of what sits
// above it. Its sandboxes move through the states as a node's do and its
// refusals are the node's kinds of error (NotFound, Conflict); a test can
// make any call fail (Fail) and read what was asked (Requests).
package nodefake

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/tokens"
)

// Node is the fake node.
type Node struct {
	mu        sync.Mutex
	sandboxes map[string]*sandboxes.Info
	requests  []sandboxes.CreateRequest
	fail      map[string]error
	next      int
	secret    []byte
}

var _ sandboxes.Node = (*Node)(nil)

// New returns a node without sandboxes that derives sandboxes' tokens,
// when a create asks, from secret (the cluster's, as a node's
// Config.Secret).
func New(secret []byte) *Node {
	return &Node{sandboxes: map[string]*sandboxes.Info{}, fail: map[string]error{}, secret: secret}
}

// Fail makes every later call of method (its name: "Create", "Kill" …)
// fail with err; nil lets it succeed again.
func (n *Node) Fail(method string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err == nil {
		delete(n.fail, method)
		return
	}
	n.fail[method] = err
}

// Requests are the creates the node was asked for, in order.
func (n *Node) Requests() []sandboxes.CreateRequest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.requests)
}

// Add puts a sandbox in the table as it is (one a node runs that the
// caller did not create: a restart's, a crash's).
func (n *Node) Add(info sandboxes.Info) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sandboxes[info.ID] = &info
}

// failing is the error a test set for method; it takes n.mu.
func (n *Node) failing(method string) error { return n.fail[method] }

// Create starts a sandbox of req's template: running for req.Timeout,
// with req's id or the next of the node's own.
func (n *Node) Create(_ context.Context, req sandboxes.CreateRequest) (sandboxes.Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.requests = append(n.requests, req)
	if err := n.failing("Create"); err != nil {
		return sandboxes.Info{}, err
	}
	id := req.ID
	if id == "" {
		n.next++
		id = fmt.Sprintf("ifake%015d", n.next)
	}
	if _, ok := n.sandboxes[id]; ok {
		return sandboxes.Info{}, errs.New(errs.AlreadyExists, "sandbox %s exists", id)
	}
	limits := req.Limits
	if limits == (isolation.Limits{}) {
		limits = sandboxes.DefaultLimits
	}
	now := time.Now()
	info := sandboxes.Info{ID: id, TemplateID: cmp.Or(req.Template, "base"), BuildID: req.BuildID, Team: req.Team, Isolation: cmp.Or(req.Isolation, "namespaces"),
		State: sandboxes.StateRunning, Limits: limits, StartedAt: now, EndAt: now.Add(req.Timeout), Metadata: maps.Clone(req.Metadata),
		EnvVars: maps.Clone(req.EnvVars), Volumes: req.Volumes, AccessToken: req.AccessToken, TrafficToken: req.TrafficToken,
		Settings: req.Settings, Timeout: req.Timeout, Node: req.Node}
	if req.DeriveTokens {
		info.AccessToken, info.TrafficToken = tokens.Sandbox(n.secret, id, req.Secure, req.PublicTraffic)
	}
	n.sandboxes[id] = &info
	return info, nil
}

// lookup is sandbox id, or NotFound; it takes n.mu.
func (n *Node) lookup(method, id string) (*sandboxes.Info, error) {
	if err := n.failing(method); err != nil {
		return nil, err
	}
	info, ok := n.sandboxes[id]
	if !ok {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return info, nil
}

// Kill ends a sandbox: it leaves the table.
func (n *Node) Kill(_ context.Context, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := n.lookup("Kill", id); err != nil {
		return err
	}
	delete(n.sandboxes, id)
	return nil
}

// Get returns a sandbox.
func (n *Node) Get(_ context.Context, id string) (sandboxes.Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	info, err := n.lookup("Get", id)
	if err != nil {
		return sandboxes.Info{}, err
	}
	return *info, nil
}

// List returns every sandbox, oldest first.
func (n *Node) List(context.Context) ([]sandboxes.Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.failing("List"); err != nil {
		return nil, err
	}
	out := make([]sandboxes.Info, 0, len(n.sandboxes))
	for _, info := range n.sandboxes {
		out = append(out, *info)
	}
	slices.SortFunc(out, func(a, b sandboxes.Info) int { return a.StartedAt.Compare(b.StartedAt) })
	return out, nil
}

// retime moves a running sandbox's end to timeout from now (with extend,
// only later).
func (n *Node) retime(method, id string, timeout time.Duration, extend bool) (sandboxes.Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	info, err := n.lookup(method, id)
	if err != nil {
		return sandboxes.Info{}, err
	}
	if info.State != sandboxes.StateRunning {
		return sandboxes.Info{}, errs.New(errs.Conflict, "sandbox %s is %s", id, info.State)
	}
	end := time.Now().Add(timeout)
	if !extend || end.After(info.EndAt) {
		info.EndAt = end
	}
	return *info, nil
}

// SetTimeout makes a running sandbox end timeout from now; 0 or less ends
// it now as a node's timer would: paused with AutoPause, else killed (it
// leaves the table).
func (n *Node) SetTimeout(_ context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	if timeout > 0 {
		return n.retime("SetTimeout", id, timeout, false)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	info, err := n.lookup("SetTimeout", id)
	if err != nil {
		return sandboxes.Info{}, err
	}
	if info.State != sandboxes.StateRunning {
		return sandboxes.Info{}, errs.New(errs.NotFound, "sandbox %s is %s", id, info.State)
	}
	info.EndAt = time.Now()
	if info.AutoPause {
		info.State = sandboxes.StatePaused
		return *info, nil
	}
	delete(n.sandboxes, id)
	info.State, info.Exit = sandboxes.StateKilled, isolation.Exit{Reason: isolation.ExitDestroyed, Detail: "timeout"}
	return *info, nil
}

// ExtendTimeout moves a running sandbox's end to timeout from now unless
// it ends later already.
func (n *Node) ExtendTimeout(_ context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	return n.retime("ExtendTimeout", id, timeout, true)
}

// Stats returns no use.
func (n *Node) Stats(_ context.Context, id string) (isolation.Stats, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, err := n.lookup("Stats", id)
	return isolation.Stats{}, err
}

// AgentLog returns an empty log.
func (n *Node) AgentLog(_ context.Context, id string) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, err := n.lookup("AgentLog", id)
	return nil, err
}

// UpdateNetwork records nothing of u but that the sandbox exists.
func (n *Node) UpdateNetwork(_ context.Context, id string, _ sandboxes.NetworkUpdate) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, err := n.lookup("UpdateNetwork", id)
	return err
}

// setState moves a sandbox from one state to another, or says why not.
func (n *Node) setState(method, id string, from, to sandboxes.State) (sandboxes.Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	info, err := n.lookup(method, id)
	if err != nil {
		return sandboxes.Info{}, err
	}
	if info.State != from {
		return sandboxes.Info{}, errs.New(errs.Conflict, "sandbox %s is %s, not %s", id, info.State, from)
	}
	info.State = to
	return *info, nil
}

// Pause pauses a running sandbox with its memory.
func (n *Node) Pause(_ context.Context, id string, _ bool) (sandboxes.Info, error) {
	return n.setState("Pause", id, sandboxes.StateRunning, sandboxes.StatePaused)
}

// PauseFiles pauses a running sandbox keeping its files only.
func (n *Node) PauseFiles(_ context.Context, id string) (sandboxes.Info, error) {
	return n.setState("PauseFiles", id, sandboxes.StateRunning, sandboxes.StatePaused)
}

// Resume lets a paused sandbox run again for timeout.
func (n *Node) Resume(_ context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	if _, err := n.setState("Resume", id, sandboxes.StatePaused, sandboxes.StateRunning); err != nil {
		return sandboxes.Info{}, err
	}
	return n.retime("Resume", id, timeout, false)
}

// Resize gives a paused sandbox l's CPUs and memory (a zero one keeps
// its own); the fake has no bounds but the state.
func (n *Node) Resize(_ context.Context, id string, l isolation.Limits, _ *sandboxes.TeamQuota) (sandboxes.Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	info, err := n.lookup("Resize", id)
	if err != nil {
		return sandboxes.Info{}, err
	}
	if info.State != sandboxes.StatePaused {
		return sandboxes.Info{}, errs.New(errs.Conflict, "sandbox %s is %s, not paused", id, info.State)
	}
	if l.CPUMillis > 0 {
		info.Limits.CPUMillis = l.CPUMillis
	}
	if l.MemoryMB > 0 {
		info.Limits.MemoryMB = l.MemoryMB
	}
	return *info, nil
}

// SaveLayer copies a sandbox as it is: its record, and a layer named
// "layer-of-<id>" that holds nothing (no processes).
func (n *Node) SaveLayer(_ context.Context, id string, _ bool) (sandboxes.Copy, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	info, err := n.lookup("SaveLayer", id)
	if err != nil {
		return sandboxes.Copy{}, err
	}
	return sandboxes.NewCopy(*info, template.LayerSum{Name: "layer-of-" + id}, nil, nil, func() {}), nil
}
