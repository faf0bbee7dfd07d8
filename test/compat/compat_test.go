// Package compat drives the official E2B SDKs (npm) against a real `cove
// server` started from bin/cove.
package compat

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

const apiKey = "e2b_00000000000000000000000000000000c0ffee00"

func npmInstall(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("node_modules/@e2b/desktop/package.json"); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

// TestOfficialJSSDK runs sdk.test.mjs and template.test.mjs with node's
// test runner, against a server whose sandboxes (template builds included)
// run on namespaces and on gVisor (TestOfficialJSSDKMicroVM: in guests).
func TestOfficialJSSDK(t *testing.T) {
	for _, isolation := range []string{"namespaces", "gvisor"} {
		t.Run(isolation, func(t *testing.T) { officialJSSDK(t, isolation) })
	}
}

func officialJSSDK(t *testing.T, isolation string) {
	if isolation == "gvisor" {
		testutil.NeedRunsc(t)
	}
	srv := testutil.StartServer(t, apiKey, "--default-isolation", isolation)
	npmInstall(t)
	defer func() {
		if left := srv.Leftovers(); len(left) > 0 {
			t.Errorf("the suite left sandboxes behind: %v", left)
		}
	}()
	// Whether a snapshot or a fork keeps the sandbox's processes: gVisor's
	// always do; a guest's do once its /usr is a disk image (QEMU cannot
	// save a guest with a virtiofs share), made in the background from the
	// first guest on. The suite runs on that image, as a server does once
	// it has made it.
	copies := "0"
	switch isolation {
	case "gvisor":
		copies = "1"
	case "microvm":
		code, m := apiCall(t, srv.URL, "POST", "/sandboxes", `{"templateID":"base","timeout":900}`)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, m)
		}
		testutil.WaitBindImage(t, srv.DataDir, 10*time.Minute)
		if code, m := apiCall(t, srv.URL, "DELETE", "/sandboxes/"+m["sandboxID"].(string), ""); code != http.StatusNoContent {
			t.Fatalf("kill: %d %v", code, m)
		}
		copies = "1"
		if os.Getenv("COVE_LONG") == "" && os.Getenv("COMPAT_ONLY") == "" {
			t.Setenv("COMPAT_ONLY", microVMShort)
		}
	}
	runNode(t, append(sdkEnv(srv.Addr), "COMPAT_COPIES_PROCESSES="+copies), "sdk.test.mjs", "template.test.mjs")
	if isolation == "namespaces" {
		runReadmeSnippet(t, sdkEnv(srv.Addr), "js", "base")
	}
}

// apiCall sends a request to the API at url with the test's key and
// returns the status and the answer's JSON object.
func apiCall(t *testing.T, url, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestCodeInterpreter runs code-interpreter.test.mjs (the official
// @e2b/code-interpreter) on each isolation driver, and the Python suite's
// test_code_interpreter.py (e2b-code-interpreter) on namespaces.
func TestCodeInterpreter(t *testing.T) {
	for _, isolation := range []string{"namespaces", "gvisor"} {
		t.Run(isolation, func(t *testing.T) {
			if isolation == "gvisor" {
				testutil.NeedRunsc(t)
			}
			srv := testutil.StartServer(t, apiKey, "--default-isolation", isolation)
			npmInstall(t)
			runNodeTests(t, srv.Addr, "code-interpreter.test.mjs")
			runReadmeSnippet(t, sdkEnv(srv.Addr), "code-interpreter", "ci-compat") // the template the suite built
			if isolation == "namespaces" {
				checkImports(t, srv.Addr, "ci-compat")
				runPytest(t, sdkEnv(srv.Addr), "test_code_interpreter.py")
				runReadmeSnippet(t, sdkEnv(srv.Addr), "python-code-interpreter", "ci-compat")
				runGuideExtend(t, sdkEnv(srv.Addr), srv.URL, "code-interpreter", "code-interpreter-v1", "ci-compat")
			}
			if left := srv.Leftovers(); len(left) > 0 {
				t.Errorf("the suite left sandboxes behind: %v", left)
			}
		})
	}
}

// runNodeTests runs node's test runner on files against the server at addr.
func runNodeTests(t *testing.T, addr string, files ...string) {
	t.Helper()
	runNode(t, sdkEnv(addr), files...)
}

// sdkEnv points the official SDK at the server at addr.
func sdkEnv(addr string) []string {
	return []string{"E2B_API_URL=http://" + addr, "E2B_SANDBOX_URL=http://" + addr, "E2B_API_KEY=" + apiKey}
}

// fileTimeout is how long node's test runner gives each file: a guard
// against a file that hangs, not a measure. Emulated guests (no KVM here)
// need about four minutes for the SDK's suite, and took more than five on
// a loaded machine; the code interpreter's file on gVisor took two in CI,
// which starts the kernels of six languages one after another.
const fileTimeout = 8 * time.Minute

// runNode runs node's test runner on files with env (and no other E2B_
// variable).
func runNode(t *testing.T, env []string, files ...string) {
	t.Helper()
	args := []string{"--test", "--test-concurrency=1", "--test-timeout=" + strconv.FormatInt(fileTimeout.Milliseconds(), 10)}
	if only := os.Getenv("COMPAT_ONLY"); only != "" { // a developer's filter: test names matching it
		args = append(args, "--test-name-pattern="+only)
	}
	cmd := exec.Command("node", append(args, files...)...)
	cmd.Env = append(nodeEnv(env), "COMPAT_RUN="+fmt.Sprint(time.Now().UnixNano()))
	runLogged(t, "node --test", cmd)
}

// runLogged runs a test runner's cmd: its output goes to the test's log,
// or into the error when it fails.
func runLogged(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s: %v\n%s", name, err, strings.Join(lines, "\n"))
		return
	}
	t.Logf("%s", strings.Join(lines, "\n"))
}

// nodeEnv is this process's environment without its E2B_ variables, and
// env.
func nodeEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "E2B_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.StopPostgres()
	testutil.StopObjectStore()
	os.Exit(code)
}

// TestOfficialJSSDKCluster runs sdk.test.mjs and template.test.mjs against
// a cluster — two API replicas and three nodes over PostgreSQL and an S3
// bucket — with every request of the SDK, its API calls and its sandbox
// traffic, spread over both replicas by a round robin, as a load balancer
// would: templates are built on one node, their sandboxes run on any, a
// build's status and log come from either replica.
func TestOfficialJSSDKCluster(t *testing.T) {
	url, passed := balanced(t, func() testutil.Cluster { return testutil.StartCluster(t, apiKey, testutil.Postgres(t), 2, 3) })
	npmInstall(t)
	runNode(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + apiKey},
		"sdk.test.mjs", "template.test.mjs")
	if n := passed(); n < 20 {
		t.Errorf("the balancer passed on %d requests", n)
	}
}

// balanced starts a cluster and a balancer before its API replicas, which
// sends each request to the next replica, and returns the balancer's URL
// and how many requests it passed on so far. The replicas' sandbox domain
// is the balancer's, as it would be behind a real one. When the test ends
// no node may hold a user's sandbox.
func balanced(t *testing.T, start func() testutil.Cluster) (string, func() uint32) {
	var next atomic.Uint32
	var targets []*url.URL
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(targets[next.Add(1)%uint32(len(targets))])
		r.Out.Host = r.In.Host // the sandbox proxy routes by it
	}}
	balancer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A replica answers the agent's streaming RPCs before it has read
		// their request bodies: without full duplex the server drops the
		// body at the first flush, the transport fails writing it and
		// closes the replica's connection mid-stream (the SDK saw
		// "terminated"), as internal/proxy says of its own.
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	}))
	t.Setenv("COVE_DOMAIN", "localhost:"+strconv.Itoa(balancer.Listener.Addr().(*net.TCPAddr).Port))
	c := start()
	for _, a := range c.APIs {
		u, _ := url.Parse(a.URL)
		targets = append(targets, u)
	}
	balancer.Start()
	t.Cleanup(func() {
		balancer.Close()
		for _, n := range c.Nodes {
			if left := testutil.Leftovers(n.DataDir); len(left) > 0 {
				t.Errorf("the suite left sandboxes on a node: %v", left)
			}
		}
	})
	return balancer.URL, next.Load
}

// TestClusterNodeKilled: a node SIGKILLed under load and during a
// template build — its sandboxes are reported gone within 10 s, creates go
// on on the other nodes, the build fails at once (not left building), and
// the node back leaves nothing of them.
func TestClusterNodeKilled(t *testing.T) {
	dsn := testutil.Postgres(t)
	c := testutil.StartCluster(t, apiKey, dsn, 2, 3)
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	apiBody := func(method, path, body string, i int) (int, map[string]any) {
		t.Helper()
		return apiCall(t, c.APIs[i%2].URL, method, path, body)
	}
	api := func(method, path string, i int) (int, map[string]any) {
		t.Helper()
		return apiBody(method, path, `{"timeout":120}`, i)
	}
	for i := range 9 {
		if code, m := api("POST", "/v2/sandboxes", i); code != 201 {
			t.Fatalf("create: %d %v", code, m)
		}
	}
	// A build that runs until its node dies: that node is the one killed.
	code, m := apiBody("POST", "/v3/templates", `{"name":"dies-with-its-node"}`, 0)
	if code != 202 {
		t.Fatalf("request a build: %d %v", code, m)
	}
	tplID, buildID := m["templateID"].(string), m["buildID"].(string)
	if code, m := apiBody("POST", "/v2/templates/"+tplID+"/builds/"+buildID, `{"fromTemplate":"base","steps":[{"type":"RUN","args":["sleep 600"]}]}`, 0); code != 202 {
		t.Fatalf("start the build: %d %v", code, m)
	}
	victim := -1
	testkit.Eventually(t, 30*time.Second, func() error {
		recs, _ := st.Templates(context.Background())
		for _, r := range recs {
			if b := r.Build(buildID); b != nil && b.Status == "building" && b.Node != "" {
				victim, _ = strconv.Atoi(strings.TrimPrefix(b.Node, "n"))
				victim--
				return nil
			}
		}
		return errors.New("the build did not start on a node")
	})
	victimName := fmt.Sprintf("n%d", victim+1)
	ids, err := st.SandboxesOn(context.Background(), victimName)
	if err != nil || len(ids) == 0 {
		t.Fatalf("%s's sandboxes: %v %v", victimName, ids, err)
	}
	// Load while the node dies: creates through both replicas.
	load, stopLoad := context.WithCancel(context.Background())
	failed := make(chan []string, 1)
	go func() {
		var why []string
		for i := 0; load.Err() == nil; i++ {
			if code, m := api("POST", "/v2/sandboxes", i); code == 201 {
				api("DELETE", "/sandboxes/"+m["sandboxID"].(string), i)
			} else {
				why = append(why, fmt.Sprint(code, " ", m["message"]))
			}
		}
		failed <- why
	}()
	c.KillNode(t, victim)
	killed := time.Now()
	gone := map[string]bool{}
	for len(gone) < len(ids) && time.Since(killed) < 15*time.Second {
		for _, id := range ids {
			if code, _ := api("GET", "/sandboxes/"+id, 1); code == 404 {
				gone[id] = true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(killed)
	if len(gone) < len(ids) || took > 10*time.Second {
		t.Errorf("%d of the node's %d sandboxes reported gone %v after its SIGKILL, want all within 10 s", len(gone), len(ids), took)
	}
	// The build it ran failed with it, through either replica.
	if code, m := api("GET", "/templates/"+tplID+"/builds/"+buildID+"/status", 1); code != 200 || m["status"] != "error" {
		t.Errorf("the build of the killed node, %v after: %d %v", time.Since(killed).Round(100*time.Millisecond), code, m)
	}
	// Their records go once the node's lease (8 s) passed.
	for {
		on, err := st.SandboxesOn(context.Background(), victimName)
		if err == nil && len(on) == 0 {
			break
		}
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("the killed node's records are kept 20 s after: %v %v", on, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	forgotten := time.Since(killed)
	stopLoad()
	t.Logf("the killed node's sandboxes were gone %v after its SIGKILL, their records %v after",
		took.Round(100*time.Millisecond), forgotten.Round(100*time.Millisecond))
	if why := <-failed; len(why) > 0 {
		t.Errorf("%d creates failed while the node died: %q", len(why), why)
	}
	for i := range 3 {
		if code, m := api("POST", "/v2/sandboxes", i); code != 201 {
			t.Errorf("a create after the loss: %d %v", code, m)
		}
	}
	c.RestartNode(t, victim)
	var left []string
	if !testkit.Wait(10*time.Second, func() bool { left = testutil.Leftovers(c.Nodes[victim].DataDir); return len(left) == 0 }) {
		t.Errorf("the node came back with the sandboxes the cluster forgot: %v", left)
	}
}

// TestOfficialJSSDKMicroVM runs the suite of TestOfficialJSSDK on guests:
// in make test the cases where a guest differs most (its agent's commands
// and files, a pause with memory and one without, a fork, a template
// build; microVMShort), the whole suite with COVE_LONG (make test-long).
// Emulated guests made the whole suite three minutes of make test's
// longest package; the driver's own suite (internal/isolation/microvm)
// runs whole in both.
func TestOfficialJSSDKMicroVM(t *testing.T) { officialJSSDK(t, "microvm") }

// microVMShort names, for node's test runner, the cases of the JS suite
// make test runs on guests.
const microVMShort = `^(create answers|commands: stdout|commands: background|files: text and bytes|pause and connect|pause without memory|fork:|Template\.build: runCmd)`

// TestOfficialJSSDKClusterSplit runs the SDK's pause-and-connect test
// against a cluster whose API calls all go to one replica and whose
// sandbox traffic all goes through the other, as an attack's client did:
// the other replica's pooled connection into the sandbox outlived its
// pause, and the SDK's isRunning() hung on it until its node closed its
// byte streams at the pause.
func TestOfficialJSSDKClusterSplit(t *testing.T) {
	c := testutil.StartCluster(t, apiKey, testutil.Postgres(t), 2, 1)
	npmInstall(t)
	t.Setenv("COMPAT_ONLY", "pause and connect")
	runNode(t, []string{"E2B_API_URL=" + c.APIs[0].URL, "E2B_SANDBOX_URL=" + c.APIs[1].URL, "E2B_API_KEY=" + apiKey}, "sdk.test.mjs")
	for _, n := range c.Nodes {
		if left := testutil.Leftovers(n.DataDir); len(left) > 0 {
			t.Errorf("the suite left sandboxes on a node: %v", left)
		}
	}
}
