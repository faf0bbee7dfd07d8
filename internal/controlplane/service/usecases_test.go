package service_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/nodefake"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/tokens"
)

// The use cases of package service over a fake node and a store of its
// own: what each asks the node, records and answers, without root or a
// sandbox.

var secret = []byte("unit-test-secret")

// newService is a service over a fake node and an SQLite store in a
// temporary directory, with cfg.
func newService(t *testing.T, cfg service.Config) (*service.Service, *nodefake.Node, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := nodefake.New(secret)
	return service.New(cfg, st, n, secret, slog.New(slog.DiscardHandler)), n, st
}

// create is a sandbox svc created of request(edit), or the test's end.
func create(t *testing.T, svc *service.Service, edit func(*service.CreateRequest)) service.Sandbox {
	t.Helper()
	sb, err := svc.Create(context.Background(), request(edit))
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// request is a create of base for team t, as the API makes one.
func request(edit func(*service.CreateRequest)) service.CreateRequest {
	req := service.CreateRequest{CreateRequest: sandboxes.CreateRequest{Template: "base", Team: "t", Timeout: time.Minute, Secure: true, PublicTraffic: true}}
	if edit != nil {
		edit(&req)
	}
	return req
}

func TestCreate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		edit  func(*service.CreateRequest)
		quota sandboxes.TeamQuota // the server's, for every team
		kind  errs.Kind           // the error's (0: none)
		asked bool                // the node was asked to create it
	}{
		{"base", nil, sandboxes.TeamQuota{}, 0, true},
		{"no timeout", func(r *service.CreateRequest) { r.Timeout = 0 }, sandboxes.TeamQuota{}, errs.InvalidArgument, false},
		{"a timeout past the bound", func(r *service.CreateRequest) { r.Timeout = 25 * time.Hour }, sandboxes.TeamQuota{}, errs.InvalidArgument, false},
		{"private traffic of an insecure sandbox", func(r *service.CreateRequest) { r.Secure, r.PublicTraffic = false, false }, sandboxes.TeamQuota{}, errs.InvalidArgument, false},
		{"an empty metadata key", func(r *service.CreateRequest) { r.Metadata = map[string]string{"": "v"} }, sandboxes.TeamQuota{}, errs.InvalidArgument, false},
		{"an environment variable with =", func(r *service.CreateRequest) { r.EnvVars = map[string]string{"A=B": "v"} }, sandboxes.TeamQuota{}, errs.InvalidArgument, false},
		{"a bad egress rule", func(r *service.CreateRequest) { r.EgressDeny = []string{"nonsense/99"} }, sandboxes.TeamQuota{}, errs.InvalidArgument, false},
		{"a server's team quota, which the node admits by", nil, sandboxes.TeamQuota{Sandboxes: 3, CPUs: 4}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, n, st := newService(t, service.Config{TeamQuota: tc.quota})
			ctx := context.Background()
			sb, err := svc.Create(ctx, request(tc.edit))
			if got := errs.KindOf(err); err != nil && got != tc.kind || err == nil && tc.kind != 0 {
				t.Fatalf("create: %v (%v), want kind %v", err, got, tc.kind)
			}
			if asked := len(n.Requests()) > 0; asked != tc.asked {
				t.Errorf("the node was asked to create: %v, want %v", asked, tc.asked)
			}
			if err != nil {
				// Nothing is left: no record, no sandbox on the node.
				if list, _ := n.List(ctx); len(list) != 0 {
					t.Errorf("a failed create left %d sandboxes on the node", len(list))
				}
				if ids, _ := st.AllSandboxIDs(ctx); len(ids) != 0 {
					t.Errorf("a failed create left records: %v", ids)
				}
				return
			}
			got := n.Requests()[0]
			if !got.DeriveTokens || got.Quota == nil || *got.Quota != tc.quota || got.Team != "t" {
				t.Errorf("the node's request: derive tokens %v, quota %v, team %q", got.DeriveTokens, got.Quota, got.Team)
			}
			rec, err := st.Sandbox(ctx, sb.ID)
			if err != nil || rec.Team != "t" || rec.Alias != "base" || rec.State != "running" || rec.CPUCount != 2 || rec.MemoryMB != 512 {
				t.Errorf("the record: %+v %v", rec, err)
			}
			if access, _ := tokens.Sandbox(secret, sb.ID, true, true); sb.EnvdAccessToken != access || sb.TrafficAccessToken != "" {
				t.Errorf("the answer's tokens: %q %q", sb.EnvdAccessToken, sb.TrafficAccessToken)
			}
		})
	}
}

// TestCreateNodeFails: a node's refusal is the answer, with its kind, and
// nothing is recorded.
func TestCreateNodeFails(t *testing.T) {
	t.Parallel()
	svc, n, st := newService(t, service.Config{})
	ctx := context.Background()
	n.Fail("Create", errs.New(errs.Unavailable, "node is full"))
	if _, err := svc.Create(ctx, request(nil)); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("create on a full node: %v", err)
	}
	if ids, _ := st.AllSandboxIDs(ctx); len(ids) != 0 {
		t.Errorf("records: %v", ids)
	}
}

// TestIsolationFromMetadata: the metadata's cove.isolation chooses the
// driver, and stays in the metadata as given.
func TestIsolationFromMetadata(t *testing.T) {
	t.Parallel()
	svc, n, _ := newService(t, service.Config{})
	sb := create(t, svc, func(r *service.CreateRequest) { r.Metadata = map[string]string{service.IsolationKey: "gvisor"} })
	if got := n.Requests()[0].Isolation; got != "gvisor" {
		t.Errorf("the node's isolation: %q", got)
	}
	if sb.Isolation != "gvisor" || sb.Metadata[service.IsolationKey] != "gvisor" {
		t.Errorf("the answer: isolation %q, metadata %v", sb.Isolation, sb.Metadata)
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		steps func(ctx context.Context, svc *service.Service, id string) error
		kind  errs.Kind       // the last step's error (0: none)
		state sandboxes.State // the record's state after ("": no record)
	}{
		{"pause", func(ctx context.Context, svc *service.Service, id string) error {
			return svc.Pause(ctx, "t", id, true, false)
		}, 0, "paused"},
		{"pause twice", func(ctx context.Context, svc *service.Service, id string) error {
			if err := svc.Pause(ctx, "t", id, true, false); err != nil {
				return err
			}
			return svc.Pause(ctx, "t", id, false, false)
		}, errs.Conflict, "paused"},
		{"pause and resume", func(ctx context.Context, svc *service.Service, id string) error {
			if err := svc.Pause(ctx, "t", id, false, false); err != nil {
				return err
			}
			_, err := svc.Resume(ctx, "t", id, time.Minute, false, isolation.Limits{})
			return err
		}, 0, "running"},
		{"resume a running one", func(ctx context.Context, svc *service.Service, id string) error {
			_, err := svc.Resume(ctx, "t", id, time.Minute, false, isolation.Limits{})
			return err
		}, errs.Conflict, "running"},
		{"connect to a paused one resumes it", func(ctx context.Context, svc *service.Service, id string) error {
			if err := svc.Pause(ctx, "t", id, true, false); err != nil {
				return err
			}
			_, resumed, err := svc.Connect(ctx, "t", id, time.Minute, false, isolation.Limits{})
			if err == nil && !resumed {
				return errs.New(errs.Internal, "not resumed")
			}
			return err
		}, 0, "running"},
		{"kill", func(ctx context.Context, svc *service.Service, id string) error {
			return svc.Kill(ctx, "t", id)
		}, 0, ""},
		{"another team's", func(ctx context.Context, svc *service.Service, id string) error {
			return svc.Kill(ctx, "u", id)
		}, errs.NotFound, "running"},
		{"a timeout of none ends it now", func(ctx context.Context, svc *service.Service, id string) error {
			return svc.SetTimeout(ctx, "t", id, 0)
		}, 0, ""},
		{"a timeout below none too", func(ctx context.Context, svc *service.Service, id string) error {
			return svc.SetTimeout(ctx, "t", id, -time.Second)
		}, 0, ""},
		{"another team's timeout of none", func(ctx context.Context, svc *service.Service, id string) error {
			return svc.SetTimeout(ctx, "u", id, 0)
		}, errs.NotFound, "running"},
		{"a paused one's timeout of none", func(ctx context.Context, svc *service.Service, id string) error {
			if err := svc.Pause(ctx, "t", id, true, false); err != nil {
				return err
			}
			return svc.SetTimeout(ctx, "t", id, 0)
		}, errs.NotFound, "paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, _, st := newService(t, service.Config{})
			ctx := context.Background()
			sb := create(t, svc, nil)
			err := tc.steps(ctx, svc, sb.ID)
			if got := errs.KindOf(err); err != nil && got != tc.kind || err == nil && tc.kind != 0 {
				t.Fatalf("%v (%v), want kind %v", err, got, tc.kind)
			}
			rec, err := st.Sandbox(ctx, sb.ID)
			switch {
			case tc.state == "" && !errs.Is(err, errs.NotFound):
				t.Errorf("the record stayed: %+v %v", rec, err)
			case tc.state != "" && (err != nil || rec.State != tc.state):
				t.Errorf("the record: state %q (%v), want %q", rec.State, err, tc.state)
			}
		})
	}
}

// TestTimeouts: SetTimeout moves the end both ways, Extend only later,
// and the record follows the node.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	svc, n, st := newService(t, service.Config{})
	ctx := context.Background()
	sb := create(t, svc, nil)
	end := func() time.Time {
		info, err := n.Get(ctx, sb.ID)
		rec, rerr := st.Sandbox(ctx, sb.ID)
		if err != nil || rerr != nil || !rec.EndAt.Equal(info.EndAt) {
			t.Fatalf("the record's end %v (%v), the node's %v (%v)", rec.EndAt, rerr, info.EndAt, err)
		}
		return info.EndAt
	}
	if err := svc.SetTimeout(ctx, "t", sb.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	long := end()
	if err := svc.Extend(ctx, "t", sb.ID, time.Second); err != nil || !end().Equal(long) {
		t.Errorf("extending to less moved the end: %v", err)
	}
	if err := svc.SetTimeout(ctx, "t", sb.ID, time.Second); err != nil || !end().Before(long) {
		t.Errorf("setting less did not move the end: %v", err)
	}
}

// TestTimeoutOfNone: a timeout of 0 ends a sandbox now as its lifecycle
// says (E2B's set_timeout(0)): one with auto-pause is paused and its record
// says so before the call returns; create, connect, resume and fork still
// refuse 0.
func TestTimeoutOfNone(t *testing.T) {
	t.Parallel()
	svc, n, st := newService(t, service.Config{})
	ctx := context.Background()
	sb := create(t, svc, func(r *service.CreateRequest) { r.AutoPause = true })
	if err := svc.SetTimeout(ctx, "t", sb.ID, 0); err != nil {
		t.Fatal(err)
	}
	info, err := n.Get(ctx, sb.ID)
	rec, rerr := st.Sandbox(ctx, sb.ID)
	if err != nil || rerr != nil || info.State != sandboxes.StatePaused || rec.State != sandboxes.StatePaused {
		t.Fatalf("after a timeout of 0: node %v (%v), record %v (%v), want both paused", info.State, err, rec.State, rerr)
	}
	for name, call := range map[string]func() error{
		"create": func() error {
			_, err := svc.Create(ctx, request(func(r *service.CreateRequest) { r.Timeout = 0 }))
			return err
		},
		"connect": func() error {
			_, _, err := svc.Connect(ctx, "t", sb.ID, 0, false, isolation.Limits{})
			return err
		},
		"resume": func() error { _, err := svc.Resume(ctx, "t", sb.ID, 0, false, isolation.Limits{}); return err },
		"fork": func() error {
			_, err := svc.Fork(ctx, "t", sb.ID, 1, 0)
			return err
		},
	} {
		if err := call(); !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("%s with a timeout of 0: %v, want invalid argument", name, err)
		}
	}
}

// TestReconcile: after a restart, records of sandboxes the node lost go,
// sandboxes it runs without a record are killed, and a node that cannot
// answer changes nothing.
func TestReconcile(t *testing.T) {
	t.Parallel()
	svc, n, st := newService(t, service.Config{})
	ctx := context.Background()
	kept := create(t, svc, nil)
	lost := create(t, svc, nil)
	if err := n.Kill(ctx, lost.ID); err != nil { // it died with the node
		t.Fatal(err)
	}
	n.Add(sandboxes.Info{ID: "iunrecorded", State: sandboxes.StateRunning, StartedAt: time.Now()})
	n.Fail("Get", errs.New(errs.Unavailable, "the node does not answer"))
	if err := svc.Reconcile(ctx); !errs.Is(err, errs.Unavailable) {
		t.Fatalf("reconcile while the node does not answer: %v", err)
	}
	if ids, _ := st.AllSandboxIDs(ctx); len(ids) != 2 {
		t.Fatalf("a node that did not answer lost records: %v", ids)
	}
	n.Fail("Get", nil)
	if err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, _ := st.AllSandboxIDs(ctx); len(ids) != 1 || ids[0] != kept.ID {
		t.Errorf("records after: %v, want %s alone", ids, kept.ID)
	}
	if list, _ := n.List(ctx); len(list) != 1 || list[0].ID != kept.ID {
		t.Errorf("the node runs %v, want %s alone", list, kept.ID)
	}
}

// TestFork: a fork starts count children from one copy of its parent,
// each asked of the node with the parent's template build, layers, size,
// environment, metadata and settings and the copy's layer; a bad count is
// refused before anything is copied, and a copy that fails starts none.
func TestFork(t *testing.T) {
	t.Parallel()
	svc, n, st := newService(t, service.Config{})
	ctx := context.Background()
	parent, err := svc.Create(ctx, request(func(r *service.CreateRequest) {
		r.Metadata, r.EnvVars = map[string]string{"owner": "me"}, map[string]string{"A": "1"}
		r.AutoPause, r.HTTPSPorts, r.MaskRequestHost = true, []int{8443}, "example.com"
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int{0, service.MaxForks + 1} {
		if _, err := svc.Fork(ctx, "t", parent.ID, bad, time.Minute); !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("fork %d: %v", bad, err)
		}
	}
	children, err := svc.Fork(ctx, "t", parent.ID, 3, time.Minute)
	if err != nil || len(children) != 3 {
		t.Fatalf("fork: %v %v", children, err)
	}
	reqs := n.Requests()[1:] // the parent's create first
	if len(reqs) != 3 {
		t.Fatalf("the node was asked %d creates for 3 children", len(reqs))
	}
	for i, c := range children {
		r := reqs[i]
		switch {
		case c.Err != nil:
			t.Errorf("child %d: %v", i, c.Err)
		case r.Saved == nil || r.Saved.Name != "layer-of-"+parent.ID:
			t.Errorf("child %d starts from %+v, not its parent's copy", i, r.Saved)
		case r.Metadata["owner"] != "me" || r.EnvVars["A"] != "1" || !r.AutoPause || r.MaskRequestHost != "example.com" || len(r.HTTPSPorts) != 1 || r.Team != "t":
			t.Errorf("child %d's request lost its parent's settings: %+v", i, r)
		}
		if rec, err := st.Sandbox(ctx, c.Sandbox.ID); err != nil || rec.Metadata["owner"] != "me" {
			t.Errorf("child %d's record: %+v %v", i, rec, err)
		}
	}
	n.Fail("SaveLayer", errs.New(errs.Unavailable, "the node is gone"))
	if _, err := svc.Fork(ctx, "t", parent.ID, 2, time.Minute); !errs.Is(err, errs.Unavailable) {
		t.Errorf("a fork whose copy failed: %v", err)
	}
	if got := len(n.Requests()); got != 4 {
		t.Errorf("a fork whose copy failed asked for creates: %d in all", got)
	}
}

// TestListHidesEnding: a sandbox its node reports killed (ending) is gone
// for the API already, in a list and a get.
func TestListHidesEnding(t *testing.T) {
	t.Parallel()
	svc, n, _ := newService(t, service.Config{})
	ctx := context.Background()
	kept := create(t, svc, nil)
	ending := create(t, svc, nil)
	info, _ := n.Get(ctx, ending.ID)
	info.State = sandboxes.StateKilled
	n.Add(info)
	list, err := svc.List(ctx, store.ListFilter{Team: "t"})
	if err != nil || len(list) != 1 || list[0].ID != kept.ID {
		t.Errorf("list: %v %v, want %s alone", list, err, kept.ID)
	}
	if _, err := svc.Get(ctx, "t", ending.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("get of an ending sandbox: %v", err)
	}
}

// TestConnectSize: a connect's size (E2B 2.66's onResume sizes) resizes a
// paused sandbox before its resume, with or without its memory, and the
// record takes the size; a running sandbox's connect leaves its size
// alone; a size the node refuses leaves the sandbox paused as it was.
func TestConnectSize(t *testing.T) {
	t.Parallel()
	size := isolation.Limits{CPUMillis: 3000, MemoryMB: 1024}
	for _, tc := range []struct {
		name          string
		pause, reboot bool
		fail          error // the node's resize's
		resumed       bool
		cpus, mem     int // the record's after
		state         sandboxes.State
	}{
		{name: "running: ignored", cpus: 2, mem: 512, state: "running"},
		{name: "paused: resized, resumed", pause: true, resumed: true, cpus: 3, mem: 1024, state: "running"},
		{name: "paused: rebooted at the size", pause: true, reboot: true, resumed: true, cpus: 3, mem: 1024, state: "running"},
		{name: "paused: refused", pause: true, fail: errs.New(errs.QuotaExceeded, "team quota"), cpus: 2, mem: 512, state: "paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, n, st := newService(t, service.Config{})
			ctx := context.Background()
			sb := create(t, svc, nil)
			if tc.pause {
				if err := svc.Pause(ctx, "t", sb.ID, true, false); err != nil {
					t.Fatal(err)
				}
			}
			n.Fail("Resize", tc.fail)
			_, resumed, err := svc.Connect(ctx, "t", sb.ID, time.Minute, tc.reboot, size)
			if resumed != tc.resumed || (err == nil) != (tc.fail == nil) || tc.fail != nil && !errs.Is(err, errs.KindOf(tc.fail)) {
				t.Fatalf("connect: resumed %t, %v; want resumed %t, error %v", resumed, err, tc.resumed, tc.fail)
			}
			rec, err := st.Sandbox(ctx, sb.ID)
			if err != nil || rec.CPUCount != tc.cpus || rec.MemoryMB != tc.mem || rec.State != tc.state {
				t.Errorf("the record: %s, %d CPUs, %d MiB (%v); want %s, %d and %d", rec.State, rec.CPUCount, rec.MemoryMB, err, tc.state, tc.cpus, tc.mem)
			}
			info, err := n.Get(ctx, sb.ID)
			if err != nil || int((info.Limits.CPUMillis+999)/1000) != tc.cpus || int(info.Limits.MemoryMB) != tc.mem {
				t.Errorf("the node: %+v (%v), want %d CPUs and %d MiB", info.Limits, err, tc.cpus, tc.mem)
			}
		})
	}
}
