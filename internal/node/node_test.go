package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/namespaces"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

var hostSeq atomic.Int32

type host struct {
	dir, cgroupParent string
	templates         *template.Store
}

func newHost(t *testing.T) host {
	t.Helper()
	testkit.NeedRoot(t, "")
	dir := t.TempDir()
	store, err := template.NewStore(filepath.Join(dir, "templates"), logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	h := host{dir: dir, cgroupParent: "cove-node-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(int(hostSeq.Add(1))), templates: store}
	t.Cleanup(func() {
		if g, err := cgroups.Load(h.cgroupParent); err == nil {
			_ = g.Destroy(context.Background())
		}
	})
	return h
}

// manager starts a node over the host's state, as a (re)started process would.
func (h host) manager(t *testing.T) *node.Manager { return h.managerWith(t, 0) }

// managerWith starts a node keeping pool warm sandboxes per template,
// deriving tokens from secret (none: no tokens derived).
func (h host) managerWith(t *testing.T, pool int, secret ...[]byte) *node.Manager {
	t.Helper()
	var s []byte
	if len(secret) > 0 {
		s = secret[0]
	}
	return h.managerOn(t, h.driver(t), pool, s)
}

// driver is the host's namespaces driver, starting sandboxes from the
// sandbox binary as a server does.
func (h host) driver(t *testing.T) *namespaces.Driver {
	t.Helper()
	d, err := namespaces.New(namespaces.Config{Dir: filepath.Join(h.dir, "sandboxes"), CgroupParent: h.cgroupParent,
		SandboxBinary: testutil.SandboxBinary(t)}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// managerOn starts a node on driver d.
func (h host) managerOn(t *testing.T, d isolation.Driver, pool int, secret []byte) *node.Manager {
	t.Helper()
	m, err := node.New(node.Config{Dir: filepath.Join(h.dir, "node"), MaxTimeout: time.Hour, PoolSize: pool, Secret: secret,
		DefaultLimits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 128, PIDs: 256}}, d, h.templates, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (h host) leftovers(t *testing.T) []string { return testutil.Leftovers(h.dir) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	ctx := ctxT(t)
	info, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, Metadata: map[string]string{"k": "v"},
		EnvVars: map[string]string{"GREETING": "hi"}, AccessToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if info.State != node.StateRunning || info.TemplateID != "base" || info.Limits.MemoryMB != 256 {
		t.Errorf("created %+v", info)
	}
	agent, err := m.Agent(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The template's defaults and the request's variables reached the agent.
	res, err := agent.Run(ctx, "", "echo $GREETING $(id -un) $PWD $E2B_SANDBOX_ID", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "hi user /home/user "+info.ID+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := listOf(m); len(got) != 1 || got[0].ID != info.ID || got[0].Metadata["k"] != "v" {
		t.Errorf("list %+v", got)
	}
	if st, err := m.Stats(ctx, info.ID); err != nil || st.MemoryUsage == 0 || st.MemoryLimit != 256<<20 {
		t.Errorf("stats %+v %v", st, err)
	}
	before := info.EndAt
	if got, err := m.ExtendTimeout(context.Background(), info.ID, time.Second); err != nil || !got.EndAt.Equal(before) {
		t.Errorf("extend to a shorter timeout moved the end: %v %v", got.EndAt, err)
	}
	if got, err := m.SetTimeout(context.Background(), info.ID, 30*time.Minute); err != nil || !got.EndAt.After(before) {
		t.Errorf("set timeout: %v %v", got.EndAt, err)
	}
	if err := m.Kill(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Kill(ctx, info.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("second kill: %v, want not found", err)
	}
	if _, err := m.Get(context.Background(), info.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("get after kill: %v", err)
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestReaperEndsSandboxAtTimeout(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	info, err := m.Create(ctxT(t), node.CreateRequest{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		_, err := m.Get(context.Background(), info.ID)
		if left := h.leftovers(t); !errs.Is(err, errs.NotFound) || len(left) > 0 {
			return fmt.Errorf("sandbox outlived its timeout (%v); left: %v", err, left)
		}
		return nil
	})
}

func TestBadRequestsLeaveNothing(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	tests := []struct {
		name string
		req  node.CreateRequest
		kind errs.Kind
	}{
		{"unknown template", node.CreateRequest{Template: "nope", Timeout: time.Minute}, errs.NotFound},
		{"zero timeout", node.CreateRequest{}, errs.InvalidArgument},
		{"timeout too long", node.CreateRequest{Timeout: 48 * time.Hour}, errs.InvalidArgument},
		{"memory too large", node.CreateRequest{Timeout: time.Minute, Limits: isolation.Limits{MemoryMB: 1 << 30}}, errs.InvalidArgument},
		{"bad id", node.CreateRequest{ID: "../../etc", Timeout: time.Minute}, errs.InvalidArgument},
	}
	for _, tc := range tests {
		if _, err := m.Create(ctxT(t), tc.req); !errs.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.kind)
		}
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if got := listOf(m); len(got) != 0 {
		t.Errorf("table holds %v", got)
	}
}

func TestRecoverAfterRestart(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx := ctxT(t)
	first := h.manager(t)
	alive, err := first.Create(ctx, node.CreateRequest{Timeout: time.Minute, AccessToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := first.Create(ctx, node.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // the node process "exits"; sandboxes keep running
	if err := syscallKill(dead.Handle.PID); err != nil {
		t.Fatal(err)
	}
	waitDead(t, dead.Handle.PID)
	// A sandbox the driver holds but the node never recorded (a crash
	// between the two) is a leftover too.
	orphanDir := filepath.Join(h.dir, "sandboxes", "orphan1")
	if err := os.MkdirAll(filepath.Join(orphanDir, "rw"), 0o700); err != nil {
		t.Fatal(err)
	}

	second := h.manager(t)
	defer second.Close()
	adopted, removed, err := second.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if adopted != 1 || removed != 2 {
		t.Errorf("adopted %d, removed %d; want 1 and 2", adopted, removed)
	}
	agent, err := second.Agent(alive.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := agent.Run(ctx, "", "echo adopted", 0); err != nil || string(res.Stdout) != "adopted\n" {
		t.Errorf("adopted sandbox: %q %v", res.Stdout, err)
	}
	if _, err := second.Get(context.Background(), dead.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("dead sandbox still listed: %v", err)
	}
	if err := second.Kill(ctx, alive.ID); err != nil {
		t.Fatal(err)
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestCopyInterruptedByACrash: a node that stops while it copies a
// sandbox's files (the sandbox frozen, its record saying so) lets it run
// again when it comes back: running, not half paused.
func TestCopyInterruptedByACrash(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx := ctxT(t)
	first := h.manager(t)
	sb, err := first.Create(ctx, node.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// What a node leaves when it dies mid-copy: the sandbox frozen (a pause
	// does that) and its record running, marked saving.
	if _, err := first.Pause(ctx, sb.ID, false); err != nil {
		t.Fatal(err)
	}
	first.Close()
	rec := filepath.Join(h.dir, "node", sb.ID+".json")
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["state"], m["rest"] = "running", map[string]string{"phase": string(node.PhaseSaving)}
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, data, 0o600); err != nil {
		t.Fatal(err)
	}

	second := h.manager(t)
	defer second.Close()
	if adopted, _, err := second.Recover(ctx); err != nil || adopted != 1 {
		t.Fatalf("recover: %d %v", adopted, err)
	}
	if info, err := second.Get(context.Background(), sb.ID); err != nil || info.Phase() != node.PhaseRunning {
		t.Errorf("after the restart: %+v %v, want running", info, err)
	}
	agent, err := second.Agent(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if res, err := agent.Run(short, "", "echo thawed", 0); err != nil || string(res.Stdout) != "thawed\n" {
		t.Errorf("the sandbox after the restart: %q %v (still frozen?)", res.Stdout, err)
	}
	if err := second.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// listOf is what n lists (none when it cannot).
func listOf(n interface {
	List(context.Context) ([]node.Info, error)
}) []node.Info {
	list, _ := n.List(context.Background())
	return list
}
