package gvisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// env is one test binary's host state: a data directory, the base
// template, a cgroup parent of its own, runsc and the sandbox binary.
type env struct {
	dir, cgroupParent, runsc, binary string
	tpl                              template.Template
}

var (
	sharedOnce sync.Once
	shared     env
	sharedErr  error
)

// repoBin is a file in the repository's bin/ (make build and make's runsc
// step put cove-sandbox and runsc there).
func repoBin(name string) string {
	p, _ := filepath.Abs(filepath.Join("../../../bin", name))
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func testEnv(t *testing.T) env {
	t.Helper()
	testkit.NeedRoot(t, "the gvisor driver needs root")
	runsc := repoBin("runsc")
	if runsc == "" {
		runsc, _ = exec.LookPath("runsc")
	}
	if _, err := Available(runsc); err != nil {
		t.Skipf("%v (make test installs it)", err)
	}
	binary := repoBin("cove-sandbox")
	if binary == "" {
		t.Skip("bin/cove-sandbox is missing: run make build")
	}
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cove-gvisor-test-")
		if err != nil {
			sharedErr = err
			return
		}
		tpl, err := template.EnsureBase(filepath.Join(dir, "templates"))
		shared = env{dir: dir, cgroupParent: "cove-gvtest-" + strconv.Itoa(os.Getpid()), runsc: runsc, binary: binary, tpl: tpl}
		sharedErr = err
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		// The drivers' Close: runsc's shared mount goes with the last sandbox.
		d := &Driver{cfg: Config{Dir: filepath.Join(shared.dir, "sandboxes"), CgroupParent: shared.cgroupParent}, log: logx.Discard()}
		d.host, _ = os.Open("/proc/thread-self/ns/net")
		d.Close()
		if g, err := cgroups.Load(shared.cgroupParent); err == nil {
			_ = g.Destroy(context.Background())
		}
		_ = fsutil.RemoveTree(filepath.Join(shared.dir, "templates"))
		_ = fsutil.RemoveTree(filepath.Join(shared.dir, "sandboxes", runscState))
		_ = os.Remove(filepath.Join(shared.dir, "sandboxes"))
		_ = os.Remove(shared.dir)
		// Nothing of runsc may outlive the tests: processes, mounts
		// (its shared one included), cgroups in any hierarchy, files.
		if left := runscLeftovers(shared); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "left on the host after the gvisor tests: %v\n", left)
			code = 1
		}
	}
	os.Exit(code)
}

func runscLeftovers(e env) []string {
	var left []string
	if out, _ := exec.Command("pgrep", "-f", e.dir).Output(); len(strings.TrimSpace(string(out))) > 0 {
		left = append(left, "processes "+strings.Join(strings.Fields(string(out)), ","))
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), e.dir) {
		left = append(left, "mounts")
	}
	if _, err := os.Stat(e.dir); err == nil {
		left = append(left, e.dir)
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == e.cgroupParent {
			left = append(left, "cgroup "+p)
			return filepath.SkipDir
		}
		if strings.Count(p, "/") > 7 {
			return filepath.SkipDir
		}
		return nil
	})
	return left
}

func (e env) driver(t *testing.T) *Driver {
	t.Helper()
	d, err := New(Config{Dir: filepath.Join(e.dir, "sandboxes"), CgroupParent: e.cgroupParent, Runsc: e.runsc, SandboxBinary: e.binary}, logx.Discard())
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

// leaks lists what remains on the host of sandbox id: its directory,
// runsc's state of it, its cgroup, mounts naming it, processes in its
// cgroup.
func (e env) leaks(t *testing.T, id string) []string {
	var left []string
	if _, err := os.Lstat(filepath.Join(e.dir, "sandboxes", id)); err == nil {
		left = append(left, "directory")
	}
	if _, err := os.Lstat(filepath.Join(e.dir, "sandboxes", runscState, id)); err == nil {
		left = append(left, "runsc state")
	}
	if _, err := cgroups.Load(e.cgroupParent + "/" + id); err == nil {
		left = append(left, "cgroup")
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), id) {
		left = append(left, "mount")
	}
	if out, _ := exec.Command("pgrep", "-f", id).Output(); len(strings.TrimSpace(string(out))) > 0 {
		left = append(left, "process "+strings.Fields(string(out))[0])
	}
	return left
}

func TestConformance(t *testing.T) {
	e := testEnv(t)
	isolationtest.Run(t, isolationtest.Config{
		New:   func(t *testing.T) isolation.Driver { return e.driver(t) },
		Spec:  func(*testing.T) isolation.Spec { return e.spec() },
		Leaks: e.leaks,
	})
}
