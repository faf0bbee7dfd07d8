package node_test

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/namespaces"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	"github.com/covesandbox/cove/internal/tokens"
)

// warm waits until m has n warm sandboxes of base ready and returns their
// ids.
func (h host) warm(t *testing.T, m *node.Manager, n int) map[string]bool {
	t.Helper()
	testkit.Eventually(t, time.Minute, func() error {
		if w := m.Warmed("base"); w < n {
			return fmt.Errorf("the pool has %d warm sandboxes, not %d", w, n)
		}
		return nil
	})
	return testutil.WaitWarm(t, h.dir, n)
}

func TestWarmPool(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.managerWith(t, 2)
	ctx := ctxT(t)
	if err := m.Warm(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	warm := h.warm(t, m, 2)
	// The warm sandboxes wait a while; the one handed out counts its
	// uptime from the create.
	time.Sleep(2 * time.Second)
	asked := time.Now()

	// A create takes a warm sandbox and gives it the request's settings.
	info, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, Metadata: map[string]string{"k": "v"},
		EnvVars: map[string]string{"GREETING": "hi"}, AccessToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if !warm[info.ID] || info.State != node.StateRunning || info.Metadata["k"] != "v" {
		t.Fatalf("not a warm sandbox handed out: %+v (warm: %v)", info, warm)
	}
	agent, err := m.Agent(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Made at nice 10, handed over at the normal priority.
	res, err := agent.Run(ctx, "", "echo $GREETING $(id -un) $PWD $E2B_SANDBOX_ID $(hostname) $(nice)", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "hi user /home/user "+info.ID+" "+info.ID+" 0\n"; got != want {
		t.Errorf("in the handed-out sandbox: %q, want %q", got, want)
	}
	checkUptime(t, agent, asked)
	// The token set at hand-out guards the agent.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, agent.Base+"/init", strings.NewReader(`{"accessToken":"mine"}`))
	req.Header.Set("X-Access-Token", "wrong")
	if resp, err := agent.HTTP.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("init with a wrong token: %v %v", resp, err)
	}

	// Killed, it is never handed out again; the pool refills with new ones.
	if err := m.Kill(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{info.ID: true}
	for range 3 {
		next, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if seen[next.ID] {
			t.Errorf("sandbox %s handed out twice", next.ID)
		}
		seen[next.ID] = true
		if err := m.Kill(ctx, next.ID); err != nil {
			t.Fatal(err)
		}
	}
	h.warm(t, m, 2)
	// Other limits than the template's: not from the pool.
	asked = time.Now()
	big, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, Limits: sandboxes.DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	if agent, err := m.Agent(big.ID); err != nil {
		t.Error(err)
	} else {
		checkUptime(t, agent, asked)
	}
	if h.warm(t, m, 2)[big.ID] {
		t.Errorf("a sandbox with other limits came from the pool")
	}
	m.Kill(ctx, big.ID)

	// Closing the node destroys its warm sandboxes (they have no user).
	m.Close()
	if left := testutil.Leftovers(h.dir); len(left) > 0 {
		t.Errorf("records left: %v", left)
	}
	if entries, _ := os.ReadDir(filepath.Join(h.dir, "sandboxes")); len(entries) > 0 {
		t.Errorf("warm sandboxes left after close: %d", len(entries))
	}
}

// checkUptime checks that a sandbox's uptime (/proc/uptime, which uptime
// and top read) counts from a moment after since, give or take the whole
// second its clocks are set to.
func checkUptime(t *testing.T, agent *agentclient.Client, since time.Time) {
	t.Helper()
	res, err := agent.Run(t.Context(), "", "cat /proc/uptime", 0)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(res.Stdout))
	if len(fields) != 2 {
		t.Fatalf("/proc/uptime: %q", res.Stdout)
	}
	up, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		t.Fatalf("/proc/uptime: %q", res.Stdout)
	}
	if limit := time.Since(since).Seconds() + 1; up > limit {
		t.Errorf("uptime %.2f s, more than the %.2f s since the create was asked for", up, limit)
	}
}

// outdating is the namespaces driver whose sandboxes the test can mark
// outdated, as a microVM guest made before its /usr's image is.
type outdating struct {
	*namespaces.Driver
	mu  sync.Mutex
	ids map[string]bool
}

func (o *outdating) Outdated(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ids[id]
}

// TestWarmOutdated: the pool hands out no sandbox its driver says is
// outdated, and replaces those it holds.
func TestWarmOutdated(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	d := &outdating{Driver: h.driver(t), ids: map[string]bool{}}
	m := h.managerOn(t, d, 2, nil)
	defer m.Close()
	ctx := ctxT(t)
	if err := m.Warm(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	old := h.warm(t, m, 2)
	d.mu.Lock()
	maps.Copy(d.ids, old)
	d.mu.Unlock()
	info, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if old[info.ID] {
		t.Errorf("an outdated warm sandbox was handed out")
	}
	if err := m.Kill(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	// The outdated ones go; two new ones take their place.
	testkit.Eventually(t, time.Minute, func() error {
		warm := testutil.WaitWarm(t, h.dir, 2)
		if !slices.ContainsFunc(slices.Collect(maps.Keys(warm)), func(id string) bool { return old[id] }) {
			return nil
		}
		return fmt.Errorf("the pool still holds outdated sandboxes: %v (outdated: %v)", warm, old)
	})
}

// TestWarmToken: a warm sandbox starts with the token its user will get,
// so the hand-over makes no call to the agent; the token guards it.
func TestWarmToken(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	secret := []byte("the node's secret")
	m := h.managerWith(t, 1, secret)
	defer m.Close()
	ctx := ctxT(t)
	if err := m.Warm(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	warm := h.warm(t, m, 1)
	info, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, DeriveTokens: true, Secure: true, PublicTraffic: true})
	if err != nil {
		t.Fatal(err)
	}
	if !warm[info.ID] || info.AccessToken != access(secret, info.ID) || info.TrafficToken != "" {
		t.Fatalf("hand-over: %+v", info)
	}
	agent, err := m.Agent(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := agent.Run(ctx, "", "echo ok", 0); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("with its token: %q %v", res.Stdout, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, agent.Base+"/init", strings.NewReader(`{}`))
	req.Header.Set("X-Access-Token", access(secret, "someone-else"))
	if resp, err := agent.HTTP.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another token: %v %v", resp, err)
	}
	m.Kill(ctx, info.ID)
}

// TestTokensNeedTheSecret: a node started without the secret derives no
// tokens, and a create that asks for them is refused before anything is
// made.
func TestTokensNeedTheSecret(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	if _, err := m.Create(ctxT(t), node.CreateRequest{Timeout: time.Minute, DeriveTokens: true, Secure: true}); !errs.Is(err, errs.InvalidArgument) {
		t.Errorf("a create asking for tokens on a node without the secret: %v, want InvalidArgument", err)
	}
	if list := listOf(m); len(list) != 0 {
		t.Errorf("sandboxes after the refusal: %v", list)
	}
}

// A template the node keeps cold (ColdTemplates, cove's --pool-skip) gets
// no warm sandbox, asked for or created; its creates start one each.
func TestColdTemplate(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m, err := node.New(node.Config{Dir: filepath.Join(h.dir, "node"), MaxTimeout: time.Hour, PoolSize: 2, ColdTemplates: []string{"base"},
		DefaultLimits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 128, PIDs: 256}}, h.driver(t), h.templates, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := ctxT(t)
	if err := m.Warm(ctx, "base"); err != nil {
		t.Fatal(err)
	}
	info, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // what a pool would have warmed by now (TestWarmPool: two)
	if w := m.Warmed("base"); w != 0 {
		t.Errorf("a cold template has %d warm sandboxes", w)
	}
	if err := m.Kill(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// access is the agent's token of a secure sandbox.
func access(secret []byte, id string) string {
	token, _ := tokens.Sandbox(secret, id, true, true)
	return token
}
