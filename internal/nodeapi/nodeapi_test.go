package nodeapi_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/namespaces"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/nodeapi"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	"github.com/covesandbox/cove/internal/tokens"
)

const token = "node-token-0123456789abcdef0123456789"

var secret = []byte("the cluster's secret")

func sandboxTokens(id string) (string, string) { return tokens.Sandbox(secret, id, true, false) }

// testNode is a real node (namespaces driver, no network) served over
// loopback, and what it reported ended.
type testNode struct {
	mgr    *node.Manager
	srv    *nodeapi.Server
	url    string
	mu     sync.Mutex
	ended  []string
	client *nodeapi.Client
}

func startNode(t *testing.T) *testNode {
	t.Helper()
	testkit.NeedRoot(t, "")
	dir := t.TempDir()
	store, err := template.NewStore(filepath.Join(dir, "templates"), logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	parent := "cove-nodeapi-test-" + strconv.Itoa(os.Getpid()) + "-" + filepath.Base(filepath.Dir(dir))
	d, err := namespaces.New(namespaces.Config{Dir: filepath.Join(dir, "sandboxes"), CgroupParent: parent}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{}
	var srv *nodeapi.Server
	mgr, err := node.New(node.Config{Dir: filepath.Join(dir, "node"), MaxTimeout: time.Hour, Secret: secret,
		DefaultLimits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 128, PIDs: 256},
		OnEnd: func(info sandboxes.Info) {
			tn.mu.Lock()
			tn.ended = append(tn.ended, info.ID)
			tn.mu.Unlock()
			srv.Ended(info)
		}}, d, store, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if srv, err = nodeapi.NewServer(mgr, token, logx.Discard()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	tn.mgr, tn.srv, tn.url = mgr, srv, hs.URL
	if tn.client, err = nodeapi.NewClient(hs.URL, token, nil, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, info := range listOf(mgr) {
			_ = mgr.Kill(context.Background(), info.ID)
		}
		hs.Close()
		mgr.Close()
		d.Close()
		if g, err := cgroups.Load(parent); err == nil {
			_ = g.Destroy(context.Background())
		}
		if left := testutil.Leftovers(dir); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
	return tn
}

// TestSameInProcessAndRemote runs one sandbox's life through the
// manager in process and through the node API: the answers agree, errors
// keep their kind, and the byte stream reaches the sandbox's agent.
func TestSameInProcessAndRemote(t *testing.T) {
	tn := startNode(t)
	for _, tc := range []struct {
		name string
		api  nodeapi.Manager // what an API replica asks of a node
	}{{"in process", tn.mgr}, {"remote", tn.client}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			a := tc.api
			info, err := a.Create(ctx, sandboxes.CreateRequest{Timeout: time.Minute, Team: "t1", DeriveTokens: true, Secure: true,
				Metadata: map[string]string{"k": "v"}, EnvVars: map[string]string{"GREETING": "hello"}})
			if err != nil {
				t.Fatal(err)
			}
			access, traffic := sandboxTokens(info.ID)
			if info.State != sandboxes.StateRunning || info.AccessToken != access || traffic == "" || info.TrafficToken != traffic || info.Metadata["k"] != "v" || info.Team != "t1" {
				t.Errorf("created: %+v", info)
			}
			got, err := a.Get(context.Background(), info.ID)
			if err != nil || got.ID != info.ID || got.AccessToken != info.AccessToken || !got.EndAt.Equal(info.EndAt) || got.Limits != info.Limits {
				t.Errorf("get: %+v %v, want %+v", got, err, info)
			}
			if !slices.ContainsFunc(listOf(a), func(i sandboxes.Info) bool { return i.ID == info.ID }) {
				t.Error("not listed")
			}
			// The agent, through the byte stream.
			agent := agentclient.New(func(ctx context.Context) (net.Conn, error) { return a.Dial(ctx, info.ID, 49983) })
			agent.SetToken(info.AccessToken)
			res, err := agent.Run(ctx, "", "echo $GREETING", 0)
			agent.Close()
			if err != nil || string(res.Stdout) != "hello\n" {
				t.Errorf("a command through Dial: %q %v", res.Stdout, err)
			}
			if _, err := a.Dial(ctx, info.ID, 1); err == nil {
				t.Error("a dial to a closed port connected")
			}
			if longer, err := a.SetTimeout(context.Background(), info.ID, 30*time.Minute); err != nil || !longer.EndAt.After(info.EndAt) {
				t.Errorf("set timeout: %v %v", longer.EndAt, err)
			} else if same, err := a.ExtendTimeout(context.Background(), info.ID, time.Second); err != nil || !same.EndAt.Equal(longer.EndAt) {
				t.Errorf("extend to sooner moved the end: %v %v", same.EndAt, err)
			}
			if st, err := a.Stats(ctx, info.ID); err != nil || st.MemoryLimit != 256<<20 {
				t.Errorf("stats: %+v %v", st, err)
			}
			if p, err := a.Pause(ctx, info.ID, false); err != nil || p.State != sandboxes.StatePaused {
				t.Errorf("pause: %v %v", p.State, err)
			}
			if a.Wake(ctx, info.ID) {
				t.Error("woke a sandbox without auto-resume")
			}
			if r, err := a.Resize(ctx, info.ID, isolation.Limits{MemoryMB: 192}, nil); err != nil || r.Limits.MemoryMB != 192 || r.State != sandboxes.StatePaused {
				t.Errorf("resize: %+v %s %v", r.Limits, r.State, err)
			}
			if _, err := a.Resize(ctx, info.ID, isolation.Limits{MemoryMB: 4096}, nil); !errs.Is(err, errs.InvalidArgument) || !strings.Contains(err.Error(), "maxMemoryMB") {
				t.Errorf("a resize past the template's size: %v, want a 400 naming maxMemoryMB", err)
			}
			if r, err := a.Resume(ctx, info.ID, time.Minute); err != nil || r.State != sandboxes.StateRunning {
				t.Errorf("resume: %v %v", r.State, err)
			}
			if p, err := a.PauseFiles(ctx, info.ID); err != nil || p.State != sandboxes.StatePaused {
				t.Errorf("pause without memory: %v %v", p.State, err)
			}
			if r, err := a.Resume(ctx, info.ID, time.Minute); err != nil || r.State != sandboxes.StateRunning || r.AccessToken != info.AccessToken {
				t.Errorf("resume without memory: %+v %v", r, err)
			}
			for _, c := range []struct {
				what string
				err  error
				kind errs.Kind
			}{
				{"get an unknown sandbox", func() error { _, err := a.Get(context.Background(), "nope"); return err }(), errs.NotFound},
				{"a create without a timeout", func() error { _, err := a.Create(ctx, sandboxes.CreateRequest{}); return err }(), errs.InvalidArgument},
				{"pause a sandbox twice", func() error {
					if _, err := a.Pause(ctx, info.ID, false); err != nil {
						return err
					}
					defer a.Resume(ctx, info.ID, time.Minute)
					_, err := a.Pause(ctx, info.ID, false)
					return err
				}(), errs.Conflict},
				{"dial an unknown sandbox", func() error { _, err := a.Dial(ctx, "nope", 49983); return err }(), errs.NotFound},
			} {
				if !errs.Is(c.err, c.kind) {
					t.Errorf("%s: %v (%s), want %s", c.what, c.err, errs.KindOf(c.err), c.kind)
				}
			}
			if err := a.Kill(ctx, info.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Get(context.Background(), info.ID); !errs.Is(err, errs.NotFound) {
				t.Errorf("a killed sandbox: %v", err)
			}
		})
	}
}

// TestRemoteOnly: the node refuses calls and dials without its token, and
// an API replica following its events learns of a sandbox's end.
func TestRemoteOnly(t *testing.T) {
	tn := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wrong, err := nodeapi.NewClient(tn.url, strings.Repeat("x", 40), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Create(ctx, sandboxes.CreateRequest{Timeout: time.Minute}); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("a create with a wrong token: %v", err)
	}
	if len(listOf(tn.mgr)) != 0 {
		t.Error("a sandbox was created for a wrong token")
	}
	info, err := tn.client.Create(ctx, sandboxes.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Dial(ctx, info.ID, 49983); !errs.Is(err, errs.Unauthenticated) {
		t.Errorf("a dial with a wrong token: %v", err)
	}
	if resp, err := http.Get(tn.url + "/healthz"); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Errorf("the node's liveness: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := nodeapi.NewServer(tn.mgr, "short", logx.Discard()); err == nil {
		t.Error("a node token of 5 characters was taken")
	}

	following := make(chan struct{}, 10)
	events := make(chan nodeapi.Event, 10)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go tn.client.Follow(fctx, func() { following <- struct{}{} }, func(e nodeapi.Event) { events <- e }, logx.Discard())
	<-following
	if err := tn.client.Kill(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		if !e.Ended || e.Info.ID != info.ID {
			t.Errorf("event %+v, want %s ended", e, info.ID)
		}
	case <-ctx.Done():
		t.Fatal("no event for the killed sandbox")
	}

	// A node that stops ends the byte streams it carries, as its exit
	// would, and takes no new one.
	info, err = tn.client.Create(ctx, sandboxes.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tn.client.Dial(ctx, info.ID, 49983)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tn.srv.Close()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("a byte stream after the node closed: read %d, %v; want its end", n, err)
	}
	if c, err := tn.client.Dial(ctx, info.ID, 49983); err == nil {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a byte stream opened after the node closed carries data")
		}
		c.Close()
	}
}

// listOf is what n lists (none when it cannot).
func listOf(n sandboxes.Node) []sandboxes.Info {
	list, _ := n.List(context.Background())
	return list
}
