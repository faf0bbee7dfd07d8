package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestDashboard runs dashboard.test.mjs: the dashboard in Debian's
// Chromium (playwright-core) against a real server whose metric history
// samples every second. A failing step's screenshot is saved in
// test-artifacts/ at the repository's root; COVE_SCREENSHOT=path also
// saves the sandbox's page there (the README's picture).
func TestDashboard(t *testing.T) {
	srv := testutil.StartServer(t, apiKey, "--metrics-interval", "1s")
	npmInstall(t)
	artifacts, err := filepath.Abs("../../test-artifacts")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"E2B_API_URL=http://" + srv.Addr, "E2B_SANDBOX_URL=http://" + srv.Addr, "E2B_API_KEY=" + apiKey, "DASHBOARD_ARTIFACTS=" + artifacts}
	if p := os.Getenv("COVE_SCREENSHOT"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "DASHBOARD_SCREENSHOT="+abs)
	}
	runNode(t, env, "dashboard.test.mjs")
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the test left sandboxes behind: %v", left)
	}
}

// TestDashboardPlantedCookie runs dashboard-fixation.test.mjs: a server
// over plain HTTP whose sandboxes' ports are {port}-{id}.cove.localhost,
// the dashboard on cove.localhost, a second team's key the attacker's.
// (Chromium takes no cookie for Domain=localhost itself, so the default
// domain is no parent a page can plant for; a domain with a parent is.)
func TestDashboardPlantedCookie(t *testing.T) {
	const host = "cove.localhost"
	srv := testutil.StartServer(t, apiKey, "--domain", host, "--tls-listen", "off")
	attacker := teamKey(t, srv.DataDir, "attacker")
	npmInstall(t)
	artifacts, err := filepath.Abs("../../test-artifacts")
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, []string{"E2B_API_URL=http://" + srv.Addr, "E2B_SANDBOX_URL=http://" + srv.Addr, "E2B_API_KEY=" + apiKey,
		"ATTACKER_KEY=" + attacker, "DASHBOARD_HOST=" + host, "DASHBOARD_ARTIFACTS=" + artifacts}, "dashboard-fixation.test.mjs")
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the test left sandboxes behind: %v", left)
	}
}

// teamKey makes team in a running server's data directory with `cove team
// create` and returns a key of it (`cove key create`).
func teamKey(t *testing.T, dataDir, team string) string {
	t.Helper()
	bin := testutil.Binary(t)
	if out, err := exec.Command(bin, "team", "create", team, "--data-dir", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("team create: %v %s", err, out)
	}
	out, err := exec.Command(bin, "key", "create", "--team", team, "--data-dir", dataDir).CombinedOutput()
	key := regexp.MustCompile(`E2B_API_KEY=(e2b_[0-9a-f]{40})`).FindSubmatch(out)
	if err != nil || key == nil {
		t.Fatalf("key create: %v %s", err, out)
	}
	return string(key[1])
}
