package compat

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestDesktop runs desktop.test.mjs (the official @e2b/desktop) on each
// isolation driver but microVMs, then the Python suite's test_desktop.py, (emulated here: minutes for a desktop),
// against a server in E2B's domain mode, the way the stream's https URL
// needs it. Its template is desktop's recipe over base: the host's /usr,
// where make test installs template.DesktopPackages. The server has no
// debootstrap, so that the built-in desktop itself says why it is not
// built.
func TestDesktop(t *testing.T) {
	for _, program := range []string{"Xvfb", "startxfce4", "x11vnc", "websockify", "xdotool", "scrot", "xev", "chromium"} {
		if _, err := exec.LookPath(program); err != nil {
			t.Fatalf("%s is not installed: make test installs desktop's Debian packages (scripts/deps.sh)", program)
		}
	}
	srv, domain := startDomainServer(t, "--debootstrap", "/nonexistent/debootstrap")
	npmInstall(t)
	for _, isolation := range []string{"namespaces", "gvisor"} {
		t.Run(isolation, func(t *testing.T) {
			if isolation == "gvisor" {
				testutil.NeedRunsc(t)
			}
			runNode(t, append(domainEnv(srv, domain), "DESKTOP_SETUP="+template.DesktopSetup, "DESKTOP_ISOLATION="+isolation), "desktop.test.mjs")
		})
	}
	runReadmeSnippet(t, domainEnv(srv, domain), "desktop", "desktop-compat") // the template the suite built
	runGuideExtend(t, sdkEnv(srv.Addr), srv.URL, "desktop", "desktop", "desktop-compat")
	// e2b-desktop (Python): the API and the agent over plain HTTP, the
	// stream's URL in the domain, over HTTPS with the server's CA.
	runPytest(t, append(sdkEnv(srv.Addr), "E2B_DOMAIN="+domain, "DESKTOP_SETUP="+template.DesktopSetup,
		"COMPAT_CA_FILE="+filepath.Join(srv.DataDir, "tls", "ca.pem")), "test_desktop.py")
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the suite left sandboxes behind: %v", left)
	}
}
