package server_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

const nodeToken = "cluster-test-node-token-0123456789abcdef"

// role is a cluster's process, run in this test's process: a node or an
// API replica, stopped by stop (idempotent).
type role struct {
	url, dataDir string
	stop         func()
}

// startRole runs a node (api false) or an API replica with its own data
// directory (dataDir, or a new one) on the cluster's database, listening
// on addr (or a free port).
func startRole(t *testing.T, api bool, name, dsn, dataDir, addr string) role {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	cfg := server.Config{Listen: cmp.Or(addr, "127.0.0.1:0"), DataDir: dataDir, Domain: "localhost", Database: dsn, NodeToken: nodeToken,
		NodeName: name, NodeLease: 3 * time.Second, LXCFS: "off", APIKeys: []string{keyA}, Out: io.Discard,
		CgroupParent: "cove-test-" + filepath.Base(filepath.Dir(dataDir)) + "-" + name}
	ready := make(chan net.Addr, 1)
	cfg.Ready = func(a net.Addr) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	run := server.RunNode
	if api {
		run = server.RunAPI
	}
	go func() { done <- run(ctx, cfg, logx.Discard()) }()
	var at net.Addr
	select {
	case at = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("%s: %v", name, err)
	}
	var once sync.Once
	r := role{url: "http://" + at.String(), dataDir: dataDir, stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}}
	t.Cleanup(r.stop)
	return r
}

// TestCluster runs a cluster on this machine — PostgreSQL, two API
// replicas, three nodes — and checks what its users and operators rely
// on: a sandbox created through one replica serves commands through the
// other, creates spread over the nodes, a node restarted within its lease
// keeps its sandboxes, a node that stops heartbeating
// has its sandboxes reported gone within its lease while creates go on
// on the others, the node coming back leaves nothing of them, and a
// replica that stops leaves the other serving.
func TestCluster(t *testing.T) {
	dsn := testutil.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var nodes []role
	for i := range 3 {
		nodes = append(nodes, startRole(t, false, fmt.Sprintf("n%d", i+1), dsn, "", ""))
	}
	apis := []srv{}
	var stopAPI []func()
	for i := range 2 {
		r := startRole(t, true, fmt.Sprintf("api%d", i+1), dsn, "", "")
		apis = append(apis, srv{url: r.url, dataDir: r.dataDir})
		stopAPI = append(stopAPI, r.stop)
	}
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer func() { // what a failed test left
		for _, a := range apis[1:] {
			a.killAll(t)
		}
	}()

	type sandbox struct{ id, token string }
	create := func(a srv) sandbox {
		t.Helper()
		code, m, raw := a.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"secure":true}`)
		if code != 201 {
			t.Fatalf("create through %s: %d %s", a.url, code, raw)
		}
		return sandbox{m["sandboxID"].(string), m["envdAccessToken"].(string)}
	}
	var sbs []sandbox
	for i := range 6 {
		sbs = append(sbs, create(apis[i%2]))
	}
	// Spread: every node got some.
	for i := range nodes {
		on, err := st.SandboxesOn(ctx, fmt.Sprintf("n%d", i+1))
		if err != nil || len(on) == 0 {
			t.Errorf("node n%d runs %d of 6 sandboxes (%v)", i+1, len(on), err)
		}
	}
	// Through either replica: made through one, used through the other.
	for i, sb := range sbs {
		a := apis[(i+1)%2]
		if out, err := run(ctx, a.url, sb.id, sb.token, "echo $E2B_SANDBOX_ID"); err != nil || out != sb.id+"\n" {
			t.Errorf("a command in %s through the other replica: %q %v", sb.id, out, err)
		}
		if code, m, raw := a.do(t, "GET", "/sandboxes/"+sb.id, keyA, ""); code != 200 || m["sandboxID"] != sb.id {
			t.Errorf("get %s through the other replica: %d %s", sb.id, code, raw)
		}
	}
	code, _, raw := apis[0].do(t, "GET", "/v2/sandboxes", keyA, "")
	if code != 200 || strings.Count(string(raw), `"sandboxID"`) != 6 {
		t.Errorf("list: %d %s", code, raw)
	}

	// A node restarted within its lease keeps its sandboxes.
	kept, err := st.SandboxesOn(ctx, "n2")
	if err != nil || len(kept) == 0 {
		t.Fatalf("n2's sandboxes: %v %v", kept, err)
	}
	nodes[1].stop()
	// (on its address: the replicas know it there)
	nodes[1] = startRole(t, false, "n2", dsn, nodes[1].dataDir, strings.TrimPrefix(nodes[1].url, "http://"))
	for _, sb := range sbs {
		if sb.id != kept[0] {
			continue
		}
		if out, err := run(ctx, apis[1].url, sb.id, sb.token, "echo kept"); err != nil || out != "kept\n" {
			t.Errorf("a sandbox of a node restarted within its lease: %q %v", out, err)
		}
	}

	// A node stops heartbeating: its sandboxes are gone for the API
	// within its lease (3 s) and a refresh; creates go to the others.
	lost, err := st.SandboxesOn(ctx, "n1")
	if err != nil || len(lost) == 0 {
		t.Fatalf("n1's sandboxes: %v %v", lost, err)
	}
	stopped := time.Now()
	nodes[0].stop()
	t.Logf("the node stopped in %v", time.Since(stopped).Round(10*time.Millisecond))
	for _, id := range lost {
		for {
			code, _, _ := apis[1].do(t, "GET", "/sandboxes/"+id, keyA, "")
			if code == 404 {
				break
			}
			if time.Since(stopped) > 10*time.Second {
				t.Fatalf("%s of the lost node is still reported (%d) 10 s after", id, code)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Listed no more either (their records go once the lease passed).
	for _, a := range apis {
		for {
			_, _, raw := a.do(t, "GET", "/v2/sandboxes", keyA, "")
			if !strings.Contains(string(raw), lost[0]) {
				break
			}
			if time.Since(stopped) > 10*time.Second {
				t.Fatalf("%s of the lost node is still listed by %s 10 s after", lost[0], a.url)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("the lost node's sandboxes were gone from the API %v after it stopped", time.Since(stopped).Round(100*time.Millisecond))
	// Its records go once its lease passed.
	for {
		on, err := st.SandboxesOn(ctx, "n1")
		if err == nil && len(on) == 0 {
			break
		}
		if time.Since(stopped) > 10*time.Second {
			t.Fatalf("the lost node's records are kept 10 s after it stopped: %v %v", on, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the lost node's records were forgotten %v after it stopped", time.Since(stopped).Round(100*time.Millisecond))
	for i := range 3 {
		sb := create(apis[i%2])
		if out, err := run(ctx, apis[0].url, sb.id, sb.token, "echo up"); err != nil || out != "up\n" {
			t.Errorf("a sandbox created after the loss: %q %v", out, err)
		}
	}
	// The node comes back: the sandboxes the cluster forgot go.
	back := startRole(t, false, "n1", dsn, nodes[0].dataDir, "")
	if left := testutil.Leftovers(back.dataDir); len(left) > 0 {
		t.Errorf("the node came back with the sandboxes the cluster forgot: %v", left)
	}

	// A replica stops: the other serves.
	stopAPI[0]()
	sb := create(apis[1])
	if out, err := run(ctx, apis[1].url, sb.id, sb.token, "echo still"); err != nil || out != "still\n" {
		t.Errorf("the remaining replica: %q %v", out, err)
	}
	apis[1].killAll(t)
	for _, r := range append(nodes[1:], back) {
		if left := testutil.Leftovers(r.dataDir); len(left) > 0 {
			t.Errorf("left on a node after every sandbox was killed: %v", left)
		}
	}
}
