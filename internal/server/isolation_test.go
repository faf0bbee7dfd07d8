package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/server"
)

// repoBin is a file in the repository's bin/ ("" when make has not put it
// there).
func repoBin(name string) string {
	p, _ := filepath.Abs(filepath.Join("../../bin", name))
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TestIsolationChoice: a sandbox asks for its driver through the metadata
// the official SDKs send unchanged (cove.isolation), every sandbox's
// "isolation" says which driver runs it (its metadata stays as given), a driver the node lacks is a 400
// with the reason, and an unknown one a 400 naming those it has.
func TestIsolationChoice(t *testing.T) {
	runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
	if runsc == "" || agent == "" {
		t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
	}
	s, stop := startStoppable(t, func(c *server.Config) { c.Runsc, c.SandboxBinary = runsc, agent })
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	hostKernel := unix.ByteSliceToString(uts.Release[:])
	for _, tc := range []struct {
		body, want string
		hostKernel bool // the sandbox sees the host's kernel release
	}{
		{`{"timeout":120}`, "namespaces", true},
		{`{"timeout":120,"metadata":{"cove.isolation":"gvisor"}}`, "gvisor", false},
		{`{"timeout":120,"metadata":{"cove.isolation":"microvm"}}`, "microvm", false},
	} {
		code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, tc.body)
		if code != 201 {
			t.Fatalf("create %s: %d %s", tc.body, code, raw)
		}
		id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
		code, m, raw = s.do(t, "GET", "/sandboxes/"+id, keyA, "")
		if code != 200 || m["isolation"] != tc.want {
			t.Errorf("GET of a %s sandbox: %d %s", tc.want, code, raw)
		}
		if md, _ := m["metadata"].(map[string]any); !strings.Contains(tc.body, "cove.isolation") && len(md) != 0 {
			t.Errorf("metadata of a sandbox created without any: %v", md)
		}
		// gVisor's kernel, and the guest's, report a release of their own.
		out, err := run(ctx, s.url, id, tok, "uname -r")
		if err != nil || (strings.TrimSpace(out) == hostKernel) != tc.hostKernel {
			t.Errorf("%s sandbox: kernel %q (%v); the host's is %q", tc.want, out, err, hostKernel)
		}
		// Either driver keeps its agent's log, the sandbox's logs show it.
		if got := messages(s.logs(t, keyA, id, "search=process", 200)); got != "process started|process ended" {
			t.Errorf("%s sandbox: the agent's lines in its logs: %q", tc.want, got)
		}
		if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
			t.Errorf("kill: %d %s", code, raw)
		}
	}
	if code, _, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"metadata":{"cove.isolation":"firecracker"}}`); code != 400 || !strings.Contains(string(raw), "namespaces, gvisor, microvm") {
		t.Errorf("an unknown isolation: %d %s", code, raw)
	}

	// A template may name its sandboxes' driver; a sandbox may still ask
	// for another.
	code, m, raw := s.do(t, "POST", "/v3/templates", keyA, `{"name":"on-gvisor","isolation":"gvisor"}`)
	if code != 202 {
		t.Fatalf("template: %d %s", code, raw)
	}
	tplID, build := m["templateID"].(string), m["buildID"].(string)
	buildTemplate(t, s, s, tplID, build, `{"fromTemplate":"base","steps":[{"type":"ENV","args":["ON","gvisor"]}]}`)
	for body, want := range map[string]string{
		`{"templateID":"on-gvisor","timeout":60}`:                                            "gvisor",
		`{"templateID":"on-gvisor","timeout":60,"metadata":{"cove.isolation":"namespaces"}}`: "namespaces",
	} {
		code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, body)
		if md, _ := m["sandboxID"].(string); code != 201 || md == "" {
			t.Fatalf("create %s: %d %s", body, code, raw)
		}
		id := m["sandboxID"].(string)
		_, info, _ := s.do(t, "GET", "/sandboxes/"+id, keyA, "")
		if info["isolation"] != want {
			t.Errorf("%s: runs on %v, want %s", body, info["isolation"], want)
		}
		s.do(t, "DELETE", "/sandboxes/"+id, keyA, "")
	}
	if code, _, raw := s.do(t, "POST", "/v3/templates", keyA, `{"name":"on-nothing","isolation":"qemu"}`); code != 400 {
		t.Errorf("a template on an unknown driver: %d %s", code, raw)
	}

	// Stopped with no sandbox left, nothing of gVisor's stays: no sandbox
	// directory, no mount (runsc's shared one included), no runsc process.
	stop()
	entries, _ := os.ReadDir(filepath.Join(s.dataDir, "gvisor"))
	for _, e := range entries {
		if e.Name() != ".runsc" {
			t.Errorf("left in the gvisor directory: %s", e.Name())
		}
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), s.dataDir) {
		t.Errorf("mounts left under the data directory")
	}

	without := startWith(t, func(c *server.Config) { c.Runsc = "/nonexistent/runsc" })
	if code, _, raw := without.do(t, "POST", "/v2/sandboxes", keyA, `{"metadata":{"cove.isolation":"gvisor"}}`); code != 400 || !strings.Contains(string(raw), "not available on this node") {
		t.Errorf("gvisor on a node without runsc: %d %s", code, raw)
	}
}
