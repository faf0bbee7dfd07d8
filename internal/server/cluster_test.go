package server_test

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
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
// on addr (or a free port); opts change its configuration.
func startRole(t *testing.T, api bool, name, dsn, dataDir, addr string, opts ...func(*server.Config)) role {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	cfg := server.Config{Listen: cmp.Or(addr, "127.0.0.1:0"), DataDir: dataDir, Domain: "localhost", Database: dsn, NodeToken: nodeToken,
		NodeName: name, NodeLease: 3 * time.Second, MetricsInterval: 200 * time.Millisecond, LXCFS: "off", APIKeys: []string{keyA}, Out: io.Discard,
		CgroupParent: "cove-test-" + filepath.Base(filepath.Dir(dataDir)) + "-" + name}
	for _, o := range opts {
		o(&cfg)
	}
	ready := make(chan net.Addr, 1)
	cfg.Ready = func(a net.Addr) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	run := server.RunNode
	if api {
		run = server.RunAPI
	}
	lg := logx.Discard()
	if os.Getenv("COVE_TEST_LOG") != "" { // every role's log on stderr, to debug a test

		lg = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("role", name)
	}
	go func() { done <- run(ctx, cfg, lg) }()
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
		if code, m, raw := a.do(t, "GET", "/sandboxes/"+sb.id, keyA, ""); code != 200 || m["sandboxID"] != sb.id || !strings.HasPrefix(fmt.Sprint(m["node"]), "n") {
			t.Errorf("get %s through the other replica (with its node): %d %s", sb.id, code, raw)
		}
	}
	code, _, raw := apis[0].do(t, "GET", "/v2/sandboxes", keyA, "")
	if code != 200 || strings.Count(string(raw), `"sandboxID"`) != 6 {
		t.Errorf("list: %d %s", code, raw)
	}
	// Without an object store, a snapshot is refused with what it needs.
	if code, _, raw := apis[1].do(t, "POST", "/sandboxes/"+sbs[0].id+"/snapshots", keyA, `{}`); code != 501 || !strings.Contains(string(raw), "--object-store") {
		t.Errorf("a snapshot in a cluster without an object store: %d %s", code, raw)
	}
	// A fork needs none: the children start on their parent's node.
	if code, _, raw := apis[1].do(t, "POST", "/sandboxes/"+sbs[0].id+"/fork", keyA, `{"count":1,"timeout":60}`); code != 201 {
		t.Errorf("a fork in a cluster without an object store: %d %s", code, raw)
	} else if m := regexp.MustCompile(`"sandboxID":"([^"]+)"`).FindSubmatch(raw); m != nil {
		apis[1].do(t, "DELETE", "/sandboxes/"+string(m[1]), keyA, "")
	}
	// Its logs through the other replica: the lifecycle from the database,
	// its agent's lines from its node. Both replicas hear of its end; one
	// line says so (checked at the end, when every event has come).
	logged := create(apis[0])
	if _, err := run(ctx, apis[1].url, logged.id, logged.token, "true"); err != nil {
		t.Fatal(err)
	}
	if got := messages(apis[1].logs(t, keyA, logged.id, "", 200)); got != "sandbox created|process started|process ended" {
		t.Errorf("logs through the other replica: %s", got)
	}
	if code, _, raw := apis[1].do(t, "DELETE", "/sandboxes/"+logged.id, keyA, ""); code != 204 {
		t.Fatalf("kill: %d %s", code, raw)
	}
	// The dashboard of a replica: a session made on one serves on the
	// other (the secret is the database's), and shows every node.
	login, _ := http.NewRequest("POST", apis[0].url+"/dashboard/login", strings.NewReader(`{"apiKey":"`+keyA+`"}`))
	resp, err := http.DefaultClient.Do(login)
	if err != nil || resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("dashboard login: %v %v", resp, err)
	}
	var session struct{ CSRF string } // the page's token, sent with every request
	if err := json.NewDecoder(resp.Body).Decode(&session); err != nil || session.CSRF == "" {
		t.Fatalf("dashboard login's answer: %v", err)
	}
	resp.Body.Close()
	nodesReq, _ := http.NewRequest("GET", apis[1].url+"/dashboard/api/nodes", nil)
	nodesReq.AddCookie(resp.Cookies()[0])
	nodesReq.Header.Set("X-Cove-CSRF", session.CSRF)
	if resp, err := http.DefaultClient.Do(nodesReq); err != nil || resp.StatusCode != 200 {
		t.Errorf("the dashboard's nodes through the other replica: %v %v", resp, err)
	} else {
		var list []struct{ ID string }
		_ = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list) != len(nodes) {
			t.Errorf("the dashboard shows %d nodes, want %d", len(list), len(nodes))
		}
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
	// Asked for again, a lost sandbox is said lost with its node (not
	// timed out or killed), through either replica.
	for _, a := range apis {
		if code, _, raw := a.do(t, "GET", "/sandboxes/"+lost[0], keyA, ""); code != 404 || !strings.Contains(string(raw), "was lost with its node n1 at ") ||
			!strings.Contains(string(raw), `"error_code":"sandbox_lost_with_node"`) {
			t.Errorf("a lost sandbox through %s: %d %s", a.url, code, raw)
		}
	}
	if err := st.AddAPIKey(ctx, store.APIKey{Hash: auth.HashAPIKey(keyB), Team: "other", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if code, _, raw := apis[0].do(t, "GET", "/sandboxes/"+lost[0], keyB, ""); code != 404 || strings.Contains(string(raw), "lost") {
		t.Errorf("another team's lost sandbox: %d %s", code, raw)
	}
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
	if got := messages(apis[1].logs(t, keyA, logged.id, "", 200)); got != "sandbox created|sandbox killed" {
		t.Errorf("logs of a sandbox killed in a cluster: %s", got)
	}
	apis[1].killAll(t)
	for _, r := range append(nodes[1:], back) {
		if left := testutil.Leftovers(r.dataDir); len(left) > 0 {
			t.Errorf("left on a node after every sandbox was killed: %v", left)
		}
	}
}

// TestClusterTemplates runs a cluster whose nodes share an object store (a
// real S3 server): a template requested through one replica is built on a
// node — its files uploaded through the other replica, its status read
// through either — and a sandbox of it on the other node has what the
// build made there, from layers that node fetched.
func TestClusterTemplates(t *testing.T) {
	c := startShared(t)
	apis, st, ctx := c.apis, c.st, c.ctx

	// The COPY step's files, uploaded through the replica that does not
	// run the build.
	files, hash := filesArchive(t, map[string]string{"greeting.txt": "hello from the files"})
	code, m, raw := apis[0].do(t, "POST", "/v3/templates", keyA, `{"name":"shared-tpl"}`)
	if code != 202 {
		t.Fatalf("request a build: %d %s", code, raw)
	}
	id, build := m["templateID"].(string), m["buildID"].(string)
	uploadFiles(t, apis[1], id, hash, keyA, files)
	// Another team, through the replica that did not take the upload, is
	// not told of it, and its own upload under the same hash (other
	// content) is its own: team A's build copies team A's files.
	if err := st.AddAPIKey(ctx, store.APIKey{Hash: auth.HashAPIKey(keyB), Team: "other", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	code, m, raw = apis[0].do(t, "POST", "/v3/templates", keyB, `{"name":"squatter"}`)
	if code != 202 {
		t.Fatalf("another team's template: %d %s", code, raw)
	}
	planted, _ := filesArchive(t, map[string]string{"greeting.txt": "planted by another team"})
	uploadFiles(t, apis[0], m["templateID"].(string), hash, keyB, planted)
	buildTemplate(t, apis[0], apis[1], id, build, `{"fromTemplate":"base","steps":[`+
		`{"type":"COPY","args":["greeting.txt","/srv/"],"filesHash":"`+hash+`"},`+
		`{"type":"RUN","args":["echo made > /srv/made","root"]}]}`)
	// The node's log, through either replica, whole once the build is
	// ready, and from an offset.
	status := "/templates/" + id + "/builds/" + build + "/status"
	messages := func(m map[string]any) []string {
		var out []string
		entries, _ := m["logEntries"].([]any)
		for _, e := range entries {
			out = append(out, fmt.Sprint(e.(map[string]any)["message"]))
		}
		return out
	}
	var n int
	for _, a := range apis {
		_, m, raw := a.do(t, "GET", status, keyA, "")
		logs := messages(m)
		if n = len(logs); n < 3 || !strings.Contains(fmt.Sprint(logs), "pushing the layers to the object store") || logs[n-1] != "build ready" {
			t.Errorf("the build's log through %s: %s", a.url, raw)
		}
	}
	if _, m, raw := apis[1].do(t, "GET", status+"?logsOffset="+fmt.Sprint(n-1), keyA, ""); fmt.Sprint(messages(m)) != "[build ready]" {
		t.Errorf("the build's log from its last entry: %s", raw)
	}

	// A build that sleeps, run through one replica, cancelled through the
	// other: the cancel reaches the node, whose build sandbox goes.
	code, m, raw = apis[0].do(t, "POST", "/v3/templates", keyA, `{"name":"shared-tpl"}`)
	if code != 202 {
		t.Fatalf("request a second build: %d %s", code, raw)
	}
	sleepy := m["buildID"].(string)
	if code, _, raw := apis[0].do(t, "POST", "/v2/templates/"+id+"/builds/"+sleepy, keyA, `{"fromTemplate":"base","steps":[{"type":"RUN","args":["sleep 600"]}]}`); code != 202 {
		t.Fatalf("start the second build: %d %s", code, raw)
	}
	buildSandboxes := func() (n int) { // the nodes' sandboxes: the build's alone now
		for _, dir := range c.nodes {
			entries, _ := filepath.Glob(filepath.Join(dir, "sandboxes", "*"))
			n += len(entries)
		}
		return n
	}
	testkit.Eventually(t, time.Minute, func() error {
		if buildSandboxes() == 0 {
			return fmt.Errorf("no build sandbox yet")
		}
		return nil
	})
	code, m, raw = apis[1].do(t, "POST", "/templates/"+id+"/builds/"+sleepy+"/cancel", keyA, "")
	if reason, _ := m["reason"].(map[string]any); code != 200 || m["status"] != "error" || reason["message"] != template.CancelledReason {
		t.Errorf("cancel through the replica that does not run the build: %d %s", code, raw)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if n := buildSandboxes(); n > 0 {
			return fmt.Errorf("%d sandboxes on the nodes after the cancel", n)
		}
		return nil
	})
	recs, err := st.Templates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	builtOn, own := "", ""
	for _, r := range recs {
		if r.ID == id {
			builtOn = r.Builds[0].Node
			own = r.Builds[0].Image.Layers[len(r.Builds[0].Image.Layers)-1] // the RUN step's
		}
	}
	other := map[string]string{"n1": "n2", "n2": "n1"}[builtOn]
	if other == "" {
		t.Fatalf("the build's node: %q", builtOn)
	}

	// Sandboxes of it, through the other replica, until one is on the
	// other node (creates spread: the second at the latest).
	for i := 0; ; i++ {
		code, m, raw := apis[1].do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"shared-tpl","timeout":120,"secure":true}`)
		if code != 201 {
			t.Fatalf("create from the template: %d %s", code, raw)
		}
		sid, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
		on, err := st.SandboxesOn(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(on, sid) {
			if i == 3 {
				t.Fatalf("no sandbox of the template went to %s", other)
			}
			continue
		}
		out, err := run(ctx, apis[1].url, sid, tok, "cat /srv/made /srv/greeting.txt")
		if err != nil || out != "made\nhello from the files" {
			t.Errorf("in a sandbox on %s (the build ran on %s): %q %v", other, builtOn, out, err)
		}
		// Its metric history, kept by each replica from one call per node.
		for _, a := range apis {
			testkit.Eventually(t, 20*time.Second, func() error {
				_, _, raw := a.do(t, "GET", "/sandboxes/"+sid+"/metrics", keyA, "")
				var samples []struct {
					MemUsed  int64 `json:"memUsed"`
					MemTotal int64 `json:"memTotal"`
				}
				if json.Unmarshal(raw, &samples) == nil && len(samples) > 0 && samples[0].MemUsed > 0 && samples[0].MemTotal > 0 {
					return nil
				}
				return fmt.Errorf("metrics through %s: %s", a.url, raw)
			})
		}
		break
	}
	if layers, _ := filepath.Glob(filepath.Join(c.nodes[other], "templates/layers/sha256-*")); len(layers) < 2 {
		t.Errorf("the other node's layers: %v", layers)
	}

	// Deleted through one replica: once its sandboxes ended, the node
	// that fetched its layers lets them go.
	if code, _, raw := apis[0].do(t, "DELETE", "/templates/"+id, keyA, ""); code != 204 {
		t.Fatalf("delete the template: %d %s", code, raw)
	}
	apis[1].killAll(t)
	fetched := filepath.Join(c.nodes[other], "templates/layers", own)
	testkit.Eventually(t, 20*time.Second, func() error {
		if _, err := os.Stat(fetched); err != nil {
			return nil
		}
		return fmt.Errorf("the deleted template's layer %s is still on %s", own, other)
	})
}

// sharedCluster is a cluster whose nodes share an object store: two
// nodes, two replicas, its database open.
type sharedCluster struct {
	apis  []srv
	nodes map[string]string // name → data directory
	roles map[string]role   // the nodes, by name
	st    *postgres.Store
	ctx   context.Context // the test's deadline
	dsn   string
	opts  []func(*server.Config) // every role's
}

// startShared starts a cluster whose nodes share a bucket of the test
// binary's S3 server (opts change every role's configuration); it stops
// with the test, its users' sandboxes killed first.
func startShared(t *testing.T, opts ...func(*server.Config)) sharedCluster {
	t.Helper()
	dsn := testutil.Postgres(t)
	bucket, creds := testutil.ObjectStore(t)
	opts = append(opts, func(c *server.Config) { c.ObjectStore, c.ObjectStoreCredentials = bucket, creds })
	c := sharedCluster{nodes: map[string]string{}, roles: map[string]role{}, dsn: dsn, opts: opts}
	for _, name := range []string{"n1", "n2"} {
		c.roles[name] = startRole(t, false, name, dsn, "", "", opts...)
		c.nodes[name] = c.roles[name].dataDir
	}
	for _, name := range []string{"api1", "api2"} {
		r := startRole(t, true, name, dsn, "", "", opts...)
		c.apis = append(c.apis, srv{url: r.url, dataDir: r.dataDir})
	}
	t.Cleanup(func() { c.apis[1].killAll(t) }) // before the roles stop
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	var err error
	if c.st, err = postgres.Open(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.st.Close() })
	c.ctx = ctx
	return c
}

// buildTemplate starts a waiting build through one server (or replica)
// and waits for it to be ready, reading its status through another.
func buildTemplate(t *testing.T, through, poll srv, id, build, body string) {
	t.Helper()
	if code, _, raw := through.do(t, "POST", "/v2/templates/"+id+"/builds/"+build, keyA, body); code != 202 {
		t.Fatalf("start the build: %d %s", code, raw)
	}
	testkit.Eventually(t, 2*time.Minute, func() error {
		_, st, _ := poll.do(t, "GET", "/templates/"+id+"/builds/"+build+"/status", keyA, "")
		switch st["status"] {
		case "ready":
			return nil
		case "error":
			t.Fatalf("build: %v", st)
		}
		return fmt.Errorf("build: %v", st)
	})
}

// filesArchive is a gzipped tar of files (name → content) and a hash to
// upload it under.
func filesArchive(t *testing.T, files map[string]string) ([]byte, string) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, files[name])
	}
	tw.Close()
	zw.Close()
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:])
}

// uploadFiles uploads a COPY step's files the way the SDK does: a link
// asked for, then a PUT to it.
func uploadFiles(t *testing.T, s srv, id, hash, key string, data []byte) {
	t.Helper()
	code, m, raw := s.do(t, "GET", "/templates/"+id+"/files/"+hash, key, "")
	if code != 201 || m["present"] != false {
		t.Fatalf("files link: %d %s", code, raw)
	}
	req, _ := http.NewRequest("PUT", m["url"].(string), bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("upload: %d", resp.StatusCode)
	}
	if _, m, _ := s.do(t, "GET", "/templates/"+id+"/files/"+hash, key, ""); m["present"] != true {
		t.Fatalf("the files are not there after their upload: %v", m)
	}
}

// TestClusterSnapshotAndFork runs a cluster whose nodes share an object
// store: a fork's children start on their parent's node, which holds the
// copy, with its files; a snapshot is pushed by that node and a sandbox
// of it on the other node has the files, from layers it fetched; the
// snapshot deleted is gone for every replica. On gVisor, a snapshot's
// processes run on in a sandbox of it on the other node.
func TestClusterSnapshotAndFork(t *testing.T) {
	runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
	c := startShared(t, func(c *server.Config) { c.Runsc, c.SandboxBinary = runsc, agent })
	apis, st, ctx, dirs := c.apis, c.st, c.ctx, c.nodes
	defer func() {
		if t.Failed() {
			recs, _ := st.Templates(ctx)
			for _, r := range recs {
				for _, b := range r.Builds {
					t.Logf("template %v, built on %q: layers %v, in the bucket %v", r.Names, b.Node, b.Image.Layers, b.Image.Blobs)
				}
			}
			for n, d := range dirs {
				ls, _ := filepath.Glob(filepath.Join(d, "templates/layers/*"))
				t.Logf("node %s has the layers %v", n, ls)
			}
		}
	}()
	nodeOf := func(id string) string {
		t.Helper()
		for _, n := range []string{"n1", "n2"} {
			if on, _ := st.SandboxesOn(ctx, n); slices.Contains(on, id) {
				return n
			}
		}
		t.Fatalf("sandbox %s is on no node", id)
		return ""
	}

	code, m, raw := apis[0].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"secure":true}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if out, err := run(ctx, apis[1].url, id, tok, "echo kept > ~/state"); err != nil {
		t.Fatalf("write: %q %v", out, err)
	}
	parentNode := nodeOf(id)

	code, _, raw = apis[1].do(t, "POST", "/sandboxes/"+id+"/fork", keyA, `{"count":2,"timeout":60}`)
	var kids []struct {
		Sandbox struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal(raw, &kids); code != 201 || err != nil || len(kids) != 2 {
		t.Fatalf("fork: %d %s", code, raw)
	}
	for _, k := range kids {
		if n := nodeOf(k.Sandbox.SandboxID); n != parentNode {
			t.Errorf("a child on %s, its parent on %s", n, parentNode)
		}
		if out, err := run(ctx, apis[0].url, k.Sandbox.SandboxID, k.Sandbox.EnvdAccessToken, "cat ~/state"); err != nil || out != "kept\n" {
			t.Errorf("in a child: %q %v", out, err)
		}
	}

	code, snap, raw := apis[0].do(t, "POST", "/sandboxes/"+id+"/snapshots", keyA, `{"name":"cluster-snap"}`)
	if code != 201 {
		t.Fatalf("snapshot: %d %s", code, raw)
	}
	// From the snapshot, through the other replica, until one is on the
	// node that did not make it (the parent's node is the busier one).
	for i := 0; ; i++ {
		code, c, raw := apis[1].do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"cluster-snap","timeout":60,"secure":true}`)
		if code != 201 {
			t.Fatalf("create from the snapshot: %d %s", code, raw)
		}
		cid := c["sandboxID"].(string)
		if nodeOf(cid) == parentNode {
			if i == 3 {
				t.Fatalf("no sandbox of the snapshot went to the other node")
			}
			continue
		}
		if out, err := run(ctx, apis[1].url, cid, c["envdAccessToken"].(string), "cat ~/state"); err != nil || out != "kept\n" {
			t.Errorf("from the snapshot on the other node: %q %v", out, err)
		}
		break
	}
	if code, _, raw := apis[1].do(t, "DELETE", "/templates/"+snap["snapshotID"].(string), keyA, ""); code != 204 {
		t.Errorf("delete the snapshot: %d %s", code, raw)
	}
	if code, _, raw := apis[0].do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"cluster-snap","timeout":60}`); code != 404 {
		t.Errorf("create from the deleted snapshot through the other replica: %d %s", code, raw)
	}

	if runsc == "" || agent == "" {
		t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
	}
	code, m, raw = apis[0].do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"secure":true,"metadata":{"cove.isolation":"gvisor"}}`)
	if code != 201 {
		t.Fatalf("create on gVisor: %d %s", code, raw)
	}
	gid, gtok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if out, err := run(ctx, apis[1].url, gid, gtok, counterLoop); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	readCount(t, ctx, apis[1], gid, gtok)
	if code, _, raw := apis[0].do(t, "POST", "/sandboxes/"+gid+"/snapshots", keyA, `{"name":"cluster-procs"}`); code != 201 {
		t.Fatalf("snapshot on gVisor: %d %s", code, raw)
	}
	at := readCount(t, ctx, apis[1], gid, gtok)
	gNode := nodeOf(gid)
	for i := 0; ; i++ {
		code, c, raw := apis[1].do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"cluster-procs","timeout":60,"secure":true}`)
		if code != 201 {
			t.Fatalf("create from the gVisor snapshot: %d %s", code, raw)
		}
		cid, ctok := c["sandboxID"].(string), c["envdAccessToken"].(string)
		if nodeOf(cid) == gNode {
			if i == 3 {
				t.Fatalf("no sandbox of the gVisor snapshot went to the other node")
			}
			continue
		}
		first := readCount(t, ctx, apis[1], cid, ctok)
		if first < 1 || first > at+40 {
			t.Errorf("the copy's counter starts at %d on the other node; the source's was %d just after the snapshot", first, at)
		}
		if next := readCount(t, ctx, apis[1], cid, ctok); next <= first {
			t.Errorf("the copy's counter does not run on: %d then %d", first, next)
		}
		break
	}
}
