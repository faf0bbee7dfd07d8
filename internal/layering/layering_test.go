// Package layering holds the tests of which of Cove's packages may import
// which: the house's arrows point down.
package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/covesandbox/cove/"

// deps are the packages that the packages matching pattern, their tests
// included, import directly or not (module-relative paths).
func deps(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-test", "-deps", "-f", "{{.ImportPath}}", pattern).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pattern, err, out)
	}
	var in []string
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module); ok {
			in = append(in, rest)
		}
	}
	return in
}

// under reports whether package p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// TestNoDriverImportsAnother keeps the isolation drivers apart: what all
// of them put inside a sandbox is package inside's, and none reaches into
// another (a driver's own packages, such as microvm/guest, are its own;
// their tests count).
func TestNoDriverImportsAnother(t *testing.T) {
	drivers := []string{"internal/isolation/namespaces", "internal/isolation/gvisor", "internal/isolation/microvm"}
	for _, d := range drivers {
		for _, dep := range deps(t, "../../"+d+"/...") {
			for _, other := range drivers {
				if other != d && under(dep, other) {
					t.Errorf("driver %s imports driver %s (%s)", d, other, dep)
				}
			}
		}
	}
}

// TestNodeSideBelowControlPlane: a node (its manager, its API, the
// drivers, networks, templates, the agent) imports nothing of the
// control plane, which calls it; what both sides need (the tokens derived
// from the cluster's secret) lives below both.
func TestNodeSideBelowControlPlane(t *testing.T) {
	for _, p := range []string{"internal/node", "internal/nodeapi", "internal/isolation", "internal/network",
		"internal/template", "internal/envd", "internal/volume", "internal/tokens", "cmd/cove-sandbox"} {
		for _, dep := range deps(t, "../../"+p+"/...") {
			if under(dep, "internal/controlplane") {
				t.Errorf("%s imports the control plane (%s)", p, dep)
			}
		}
	}
}

// TestControlPlaneImportsTheContract: the control plane (its use cases,
// API, store and cluster, the sandbox proxy and the dashboard) knows a
// node by its contract (internal/sandboxes), never by the node's
// implementation (internal/node), a driver or the agent, its tests
// included; and the contract
// itself is types only: nothing of the node's, the control plane's or a
// driver's. `make lint` builds both for macOS, which proves them free of
// Linux.
func TestControlPlaneImportsTheContract(t *testing.T) {
	implementation := []string{"internal/node", "internal/isolation/namespaces", "internal/isolation/gvisor", "internal/isolation/microvm",
		"internal/agentclient", "internal/envd/process", "internal/envd/filesystem", "internal/envd/identity", "internal/envd/sudo", "internal/envd/codeinterp"}
	// The agent itself is internal/envd; envdwire, below it, is its callers'.
	isImplementation := func(dep string, more ...string) bool {
		return dep == "internal/envd" || slices.ContainsFunc(append(implementation, more...), func(impl string) bool { return under(dep, impl) })
	}
	for _, part := range []string{"internal/controlplane/...", "internal/proxy", "internal/dashboard"} {
		for _, dep := range deps(t, "../../"+part) {
			if isImplementation(dep) {
				t.Errorf("the control plane (%s) imports %s", part, dep)
			}
		}
	}
	for _, dep := range deps(t, "../../internal/sandboxes") {
		if isImplementation(dep, "internal/controlplane", "internal/nodeapi") {
			t.Errorf("the node contract imports %s", dep)
		}
	}
}

// TestFakeNodeInTestsOnly: the fake node (nodefake) is for tests: no
// package but a test imports it, so no binary links it.
func TestFakeNodeInTestsOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		if slices.Contains(strings.Fields(imports), module+"internal/nodefake") {
			t.Errorf("%s imports internal/nodefake", pkg)
		}
	}
}

// sandboxBinaryModules are the modules besides Go's own that cove-sandbox,
// the init and agent of every sandbox, may link, each with what needs it:
// a module that joins fails the test until it is listed here, for a
// reason. It links no server, database, metrics, CLI or logging library,
// nor the node's cgroups (containerd's, with logrus, dbus and systemd).
var sandboxBinaryModules = map[string]string{
	"connectrpc.com/connect":            "the agent's API (process, filesystem)",
	"google.golang.org/protobuf":        "the same",
	"github.com/creack/pty":             "terminals of commands",
	"github.com/fsnotify/fsnotify":      "the filesystem API's watches",
	"github.com/go-zeromq/zmq4":         "the code interpreter's kernels",
	"github.com/google/uuid":            "the code interpreter's messages",
	"github.com/elastic/go-seccomp-bpf": "the init's system call filter",
	"github.com/vishvananda/netlink":    "the init's network (and the spawner's)",
	"github.com/vishvananda/netns":      "the same",
	"golang.org/x/sys":                  "system calls",
	"golang.org/x/net":                  "HTTP/2 without TLS for the agent (h2c)",
	"golang.org/x/text":                 "the same (x/net's idna)",
	"golang.org/x/sync":                 "errgroup",
	"golang.org/x/term":                 "sudo's terminal",
	"golang.org/x/time":                 "the agent's rate limits",
}

// TestSandboxBinaryLinks pins what cove-sandbox links: Cove's packages of
// a sandbox's side alone, and the modules above.
func TestSandboxBinaryLinks(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}{{end}}", "../../cmd/cove-sandbox").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	linked := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, mod, _ := strings.Cut(line, " ")
		linked[mod] = true
		if rest, ok := strings.CutPrefix(pkg, module); ok {
			for _, node := range []string{"internal/controlplane", "internal/server", "internal/node", "internal/dashboard", "internal/cli",
				"internal/metrics", "internal/network", "internal/template", "internal/volume", "internal/cgroups", "internal/lxcfs"} {
				if under(rest, node) {
					t.Errorf("cove-sandbox links %s, which no sandbox runs", rest)
				}
			}
			if rest == "internal/isolation/namespaces" { // the driver; its init is nsinit
				t.Errorf("cove-sandbox links the namespaces driver, not only its init (nsinit)")
			}
			continue
		}
		if mod == "" || mod == "std" {
			continue
		}
		if _, ok := sandboxBinaryModules[mod]; !ok {
			t.Errorf("cove-sandbox links %s (module %s): list it in sandboxBinaryModules with what needs it, or keep it out", pkg, mod)
		}
	}
	for mod := range sandboxBinaryModules {
		if !linked[mod] {
			t.Errorf("cove-sandbox no longer links %s: take it out of sandboxBinaryModules", mod)
		}
	}
}

// TestAddrPolicyIsALeaf: the address policy of requests made for tenants
// serves the control plane (webhooks) and the node (image pulls, upstream
// proxies) alike, so it imports neither, nor anything of Cove's but the
// error kinds and the log's attributes.
func TestAddrPolicyIsALeaf(t *testing.T) {
	for _, dep := range deps(t, "../../internal/addrpolicy") {
		if !strings.HasPrefix(dep, "internal/addrpolicy") && !slices.Contains([]string{"internal/errs", "internal/logx", "internal/testutil/testkit"}, dep) {
			t.Errorf("internal/addrpolicy imports %s", dep)
		}
	}
}
