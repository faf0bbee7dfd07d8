package compat

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
)

// venvPython is the interpreter of the repository's own virtual
// environment, which scripts/python-venv.sh (make deps) fills with the
// pins of py/requirements.txt: the official Python SDKs and pytest.
const venvPython = "py/.venv/bin/python"

// TestOfficialPythonSDK runs the Python half of the suite (py/, pytest,
// every test with the SDK's sync and its async client) against a server
// on namespaces (test_https.py once more with E2B_DOMAIN alone, the SDK
// itself over HTTPS), and its lifecycle file (pauses, snapshots, forks: where
// the drivers differ), test_https.py, its agent-parity and newer-SDK
// files and a code interpreter's child template (its start command run by
// another driver; the rest of that file costs 30 s more there) against
// one on gVisor, whose copies keep their processes.
func TestOfficialPythonSDK(t *testing.T) {
	t.Run("namespaces", func(t *testing.T) {
		srv := testutil.StartServer(t, apiKey)
		ca := filepath.Join(srv.DataDir, "tls", "ca.pem")
		runPytest(t, append(sdkEnv(srv.Addr), "COMPAT_CA_FILE="+ca),
			"test_sandbox.py", "test_commands.py", "test_files.py", "test_lifecycle.py", "test_volumes.py", "test_templates.py", "test_transport.py", "test_https.py", "test_envd_parity.py", "test_template_inherit.py", "test_newer_sdk.py")
		// E2B's domain mode with a single-label domain: E2B_DOMAIN alone,
		// the SDK (rustls) calls https://api.localhost:<port> and
		// https://49983-<id>.localhost:<port>, the port that speaks HTTPS too.
		_, port, _ := net.SplitHostPort(srv.Addr)
		runPytest(t, []string{"E2B_DOMAIN=localhost:" + port, "E2B_API_KEY=" + apiKey, "SSL_CERT_FILE=" + ca, "COMPAT_CA_FILE=" + ca}, "test_https.py")
		runReadmeSnippet(t, sdkEnv(srv.Addr), "python", "base")
		runGuideExtend(t, sdkEnv(srv.Addr), srv.URL, "base", "base", "base")
		if left := srv.Leftovers(); len(left) > 0 {
			t.Errorf("the suite left sandboxes behind: %v", left)
		}
	})
	t.Run("retries", func(t *testing.T) {
		srv := testutil.StartServer(t, apiKey, "--team-max-sandboxes", "1", "--pool-size", "0")
		front, count := countCreates(t, srv.URL)
		runPytest(t, []string{"E2B_API_URL=" + front, "E2B_SANDBOX_URL=" + srv.URL, "E2B_API_KEY=" + apiKey,
			"COMPAT_CREATES_URL=" + count}, "test_retries.py")
	})
	t.Run("gvisor", func(t *testing.T) {
		testutil.NeedRunsc(t)
		srv := testutil.StartServer(t, apiKey, "--default-isolation", "gvisor")
		runPytest(t, append(sdkEnv(srv.Addr), "COMPAT_COPIES_PROCESSES=1", "COMPAT_CA_FILE="+filepath.Join(srv.DataDir, "tls", "ca.pem")),
			"test_lifecycle.py", "test_https.py", "test_envd_parity.py", "test_newer_sdk.py",
			"test_template_inherit.py::test_a_child_of_the_code_interpreter_is_one")
		if left := srv.Leftovers(); len(left) > 0 {
			t.Errorf("the suite left sandboxes behind: %v", left)
		}
	})
}

// TestOfficialPythonSDKCluster runs the core of the Python suite —
// create, commands, files, pause and resume, snapshots and fork, templates
// over a template with a start command — against
// a cluster of two API replicas and three nodes, every request through a
// balancer that alternates between the replicas.
func TestOfficialPythonSDKCluster(t *testing.T) {
	url, passed := balanced(t, func() testutil.Cluster { return testutil.StartCluster(t, apiKey, testutil.Postgres(t), 2, 3) })
	runPytest(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + apiKey},
		"test_sandbox.py", "test_commands.py", "test_files.py", "test_lifecycle.py", "test_template_inherit.py")
	if n := passed(); n < 20 {
		t.Errorf("the balancer passed on %d requests", n)
	}
}

// runPytest runs pytest from the repository's virtual environment on
// files of py/ with env (and no other E2B_ variable). A missing
// environment fails the test: make deps makes it.
func runPytest(t *testing.T, env []string, files ...string) {
	t.Helper()
	python, err := filepath.Abs(venvPython)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the Python SDKs are not installed (%v): make deps installs them (scripts/python-venv.sh)", err)
	}
	args := []string{"-m", "pytest", "-q", "--timeout=" + fmt.Sprint(int(fileTimeout/time.Second))}
	if only := os.Getenv("COMPAT_ONLY"); only != "" { // a developer's filter: a pytest -k expression
		args = append(args, "-k", only)
	}
	cmd := exec.Command(python, append(args, files...)...)
	cmd.Dir = "py"
	cmd.Env = append(nodeEnv(env), "COMPAT_RUN="+fmt.Sprint(time.Now().UnixNano()), "PYTHONDONTWRITEBYTECODE=1")
	runLogged(t, "pytest", cmd)
}

// countCreates puts a proxy before the API at target that counts the
// creates (POST /v2/sandboxes) it passes on: it returns the proxy's URL
// and the URL that answers the count.
func countCreates(t *testing.T, target string) (string, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/_compat/creates" {
			fmt.Fprint(w, n.Load())
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/v2/sandboxes" {
			n.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL, front.URL + "/_compat/creates"
}
