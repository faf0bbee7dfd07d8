package namespaces

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/isolation/namespaces/nsinit"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// env is one test binary's host state: a data directory, the base
// template and a cgroup parent of its own.
type env struct {
	dir, cgroupParent string
	tpl               template.Template
}

var (
	sharedOnce sync.Once
	shared     env
	sharedErr  error
)

func testEnv(t *testing.T) env {
	t.Helper()
	testkit.NeedRoot(t, "the namespaces driver needs root")
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cove-ns-test-")
		if err != nil {
			sharedErr = err
			return
		}
		if sharedErr = os.Chmod(dir, 0o711); sharedErr != nil { // user-namespaced sandboxes traverse it
			return
		}
		tpl, err := template.EnsureBase(filepath.Join(dir, "templates"))
		shared = env{dir: dir, cgroupParent: "cove-test-" + strconv.Itoa(os.Getpid()), tpl: tpl}
		sharedErr = err
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// This test binary is the sandbox binary of the test-binary cases and the
// spawner of them all: its roles run first, on the main thread, as cove's
// main runs them.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if run := nsinit.Role(); run != nil {
		os.Exit(run())
	}
	runtime.UnlockOSThread()
	code := m.Run()
	if shared.dir != "" {
		if g, err := cgroups.Load(shared.cgroupParent); err == nil {
			_ = g.Destroy(context.Background())
		}
		_ = fsutil.RemoveTree(filepath.Join(shared.dir, "templates"))
		_ = os.Remove(filepath.Join(shared.dir, "sandboxes"))
		_ = os.Remove(shared.dir)
	}
	os.Exit(code)
}

func (e env) driver(t *testing.T) *Driver {
	return e.driverWith(t, "")
}

// releaseBinary is the static cove binary `make build` leaves in bin/, if
// there: unlike a test binary it has no cgo, so the sandbox's init takes
// the in-place path (no second exec) that production uses.
func releaseBinary() string {
	p, err := filepath.Abs("../../../bin/cove")
	if err != nil {
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// binaries are the sandbox binaries to test with: this test binary (the
// exec path) and the release binary (the in-place path) when built.
func binaries() map[string]string {
	out := map[string]string{"test-binary": ""}
	if p := releaseBinary(); p != "" {
		out["release-binary"] = p
		// The init-and-agent build beside it, for sandboxes without a
		// user namespace (the release binary for the others).
		if sb := filepath.Join(filepath.Dir(p), "cove-sandbox"); fileExists(sb) {
			out["sandbox-binary"] = p + "," + sb
		}
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func (e env) driverWith(t *testing.T, binary string) *Driver {
	t.Helper()
	binary, sandbox, _ := strings.Cut(binary, ",")
	d, err := New(Config{Dir: filepath.Join(e.dir, "sandboxes"), CgroupParent: e.cgroupParent, Binary: binary, SandboxBinary: sandbox}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (e env) spec() isolation.Spec {
	return isolation.Spec{
		RootFS: e.tpl.RootFS,
		Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 256, PIDs: 256},
		Env:    map[string]string{"E2B_SANDBOX": "true"},
	}
}

// leaks lists what remains on the host of sandbox id.
func (e env) leaks(t *testing.T, id string) []string {
	var left []string
	if _, err := os.Lstat(filepath.Join(e.dir, "sandboxes", id)); err == nil {
		left = append(left, "directory")
	}
	if _, err := cgroups.Load(e.cgroupParent + "/" + id); err == nil {
		left = append(left, "cgroup")
	}
	if mounted, _ := hostMountsMention(id); mounted {
		left = append(left, "mount")
	}
	return left
}

func hostMountsMention(s string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), s), err
}

func TestConformance(t *testing.T) {
	e := testEnv(t)
	for name, bin := range binaries() {
		t.Run(name, func(t *testing.T) {
			isolationtest.Run(t, isolationtest.Config{
				New:   func(t *testing.T) isolation.Driver { return e.driverWith(t, bin) },
				Spec:  func(*testing.T) isolation.Spec { return e.spec() },
				Leaks: e.leaks,
			})
		})
	}
	// As cove server runs it: every sandbox in a user namespace of its own.
	t.Run("userns-default", func(t *testing.T) {
		isolationtest.Run(t, isolationtest.Config{
			New: func(t *testing.T) isolation.Driver {
				bin := binaries()["sandbox-binary"] // cove server's binaries, where built
				if bin == "" {
					bin = binaries()["release-binary"]
				}
				d := e.driverWith(t, bin)
				d.cfg.UserNamespaces = true
				return d
			},
			Spec:  func(*testing.T) isolation.Spec { return e.spec() },
			Leaks: e.leaks,
		})
	})
}
