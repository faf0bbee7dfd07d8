package compat

import (
	"os"
	"path/filepath"
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
