package compat

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestGuideUpstreamRecipe runs docs/GUIDE.md's "Trying it on one machine"
// as written: its fake upstream (a namespace, a certificate, an upstream
// over HTTP and HTTPS, dnsmasq naming it), a server with its flags (and
// the suite's own address range and data directory), its JavaScript,
// which must print what its comments say, and its teardown, which must
// leave no namespace, link or route behind.
func TestGuideUpstreamRecipe(t *testing.T) {
	const guide = "../../docs/GUIDE.md"
	if _, err := exec.LookPath("dnsmasq"); err != nil {
		t.Fatal("dnsmasq is missing: make deps installs dnsmasq-base")
	}
	testutil.HoldFakeInternet(t) // the recipe claims its addresses and route
	teardown := func() ([]byte, error) { return runShell(t, guide, "guide:upstream-teardown") }
	_, _ = teardown() // what an earlier run left
	t.Cleanup(func() {
		if out, err := teardown(); err != nil {
			t.Errorf("the guide's teardown: %v\n%s", err, out)
		}
		if _, err := os.Stat("/run/netns/cove-upstream"); err == nil {
			t.Error("the teardown left the namespace cove-upstream")
		}
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if _, err := netlink.LinkByName("upstream0"); err != nil {
				break
			}
			if time.Now().After(end) {
				t.Error("the teardown left the link upstream0")
				break
			}
		}
	})
	if out, err := runShell(t, guide, "guide:upstream"); err != nil {
		t.Fatalf("the guide's upstream: %v\n%s", err, out)
	}
	_, line := testutil.DocBlock(t, guide, "guide:upstream-server")
	m := regexp.MustCompile(`^make run ARGS='([^']*)'\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the guide's server is not `make run ARGS='…'`: %q", line)
	}
	srv := testutil.StartServer(t, apiKey, append([]string{"--network=true", "--network-range", "198.18.243.0/24"}, strings.Fields(m[1])...)...)
	npmInstall(t)
	runDocSnippet(t, sdkEnv(srv.Addr), guide, "guide:upstream-js", nil)
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the guide's snippet left sandboxes behind: %v", left)
	}
}

// runShell runs doc's sh block marked `<!-- name -->` as root in a shell
// that stops at the first failure.
func runShell(t *testing.T, doc, name string) ([]byte, error) {
	t.Helper()
	lang, script := testutil.DocBlock(t, doc, name)
	if lang != "sh" {
		t.Fatalf("%s's %s block is in %q, not sh", doc, name, lang)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-e", "-c", script)
	cmd.WaitDelay = 5 * time.Second // what it leaves running holds no output of ours
	return cmd.CombinedOutput()
}

// runGuideExtend runs docs/GUIDE.md's blocks that extend the built-in
// template builtin ("Extending the built-in templates"): the SDK's
// (Python, guide:extend-<block>) with env, then the Dockerfile's (sh,
// guide:extend-<block>-dockerfile) with the CLI pointed at the server at
// url, in a directory of its own. Each must print what its comments say.
// The one change: where the server has no builtin (code-interpreter-v1 and
// desktop are built from Debian's archive on first use), the blocks name
// standIn, the template the suite built over base as builtin is built.
func runGuideExtend(t *testing.T, env []string, url, block, builtin, standIn string) {
	t.Helper()
	const guide = "../../docs/GUIDE.md"
	rename := func(snippet, from, to string) string {
		if !strings.Contains(snippet, from) {
			t.Fatalf("the guide's %s block no longer has %q: %s", block, from, snippet)
		}
		return strings.ReplaceAll(snippet, from, to)
	}
	runDocSnippet(t, env, guide, "guide:extend-"+block, func(snippet string) string {
		return rename(snippet, `.from_template("`+builtin+`")`, `.from_template("`+standIn+`")`)
	})
	lang, script := testutil.DocBlock(t, guide, "guide:extend-"+block+"-dockerfile")
	if lang != "sh" {
		t.Fatalf("the guide's %s Dockerfile block is in %q, not sh", block, lang)
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)\S\s{2,}# (.*)$`).FindAllStringSubmatch(script, -1) {
		want = append(want, m[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-e", "-c", rename(script, "FROM "+builtin+"\n", "FROM "+standIn+"\n"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(nodeEnv(nil), "PATH="+filepath.Dir(testutil.Binary(t))+":"+os.Getenv("PATH"),
		"COVE_API_URL="+url, "COVE_API_KEY="+apiKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's %s Dockerfile block: %v\n%s", block, err, out)
	}
	// What it prints, in order, among the build's log.
	rest := strings.Split(string(out), "\n")
	for _, w := range want {
		i := slices.Index(rest, w)
		if i < 0 {
			t.Fatalf("the guide's %s Dockerfile block did not print %q (its comments say %q):\n%s", block, w, want, out)
		}
		rest = rest[i+1:]
	}
}
