package microvm

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/template"
)

// guestKit is what booting a guest needs: QEMU, the guest kernel, the
// sandbox binary (bin/cove-sandbox) and an initramfs of them in dir.
type guestKit struct {
	qemu, sandboxBinary, initrd string
	kernel                      Kernel
}

func newGuestKit(t *testing.T, dir string) guestKit {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("no qemu-system-x86_64: make test installs Debian's qemu-system-x86 (scripts/deps.sh)")
	}
	k, err := FindKernel(DefaultKernelDir)
	if err != nil {
		t.Fatal(err)
	}
	bin := sandboxBinary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no bin/cove-sandbox: make test builds it")
	}
	initrd := filepath.Join(dir, "initramfs.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteInitramfs(f, k, bin); err != nil {
		t.Fatal(err)
	}
	return guestKit{qemu: qemu, sandboxBinary: bin, initrd: initrd, kernel: k}
}

// sandboxBinary is bin/cove-sandbox, which make test builds.
func sandboxBinary() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "../../../bin/cove-sandbox")
}

// testDriver is a driver's config under a test's own directory (its
// "microvm"), and the base template's root made there.
func testDriver(t *testing.T) (DriverConfig, isolation.RootFS) {
	t.Helper()
	dir := t.TempDir()
	tpl, err := template.EnsureBase(filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	return DriverConfig{Dir: filepath.Join(dir, "microvm"), SandboxBinary: sandboxBinary(), CgroupParent: testCgroupParent,
		Log: slog.New(slog.DiscardHandler)}, tpl.RootFS
}

// testCgroupParent holds the tests' guests' cgroups.
var testCgroupParent = "cove-vmtest-" + strconv.Itoa(os.Getpid())

func TestMain(m *testing.M) {
	code := m.Run()
	cgroups.RemoveEmpty(testCgroupParent)
	os.Exit(code)
}

// leaks lists what sandbox id of a driver over dir left: its directory,
// mounts under it, processes naming it, its cgroup.
func leaks(dir, id string) []string {
	var left []string
	d := filepath.Join(dir, id)
	if _, err := os.Stat(d); err == nil {
		left = append(left, d)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), d) {
		left = append(left, "a mount under "+d)
	}
	if out, _ := exec.Command("pgrep", "-f", d).Output(); len(out) > 0 {
		left = append(left, "processes "+strings.TrimSpace(string(out)))
	}
	if _, err := cgroups.Load(testCgroupParent + "/" + id); err == nil {
		left = append(left, "its cgroup")
	}
	return left
}

// guestAgent is a client of sandbox id's agent; when the test ends, the
// sandbox is destroyed and must have left nothing.
func guestAgent(t *testing.T, d *Driver, id string) *agentclient.Client {
	t.Helper()
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), id); err != nil {
			t.Error(err)
		}
		if left := leaks(d.cfg.Dir, id); len(left) > 0 {
			t.Errorf("%s left: %v", id, left)
		}
	})
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
	t.Cleanup(func() { c.Close() })
	return c
}

// createGuest creates sandbox id from spec (guestAgent).
func createGuest(t *testing.T, ctx context.Context, d *Driver, id string, spec isolation.Spec) *agentclient.Client {
	t.Helper()
	if _, err := d.Create(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	return guestAgent(t, d, id)
}

// statusField is the values of a /proc/<pid>/status line ("CapEff:").
func statusField(t *testing.T, pid, key string) []string {
	t.Helper()
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == key {
			return f[1:]
		}
	}
	t.Fatalf("no %s in /proc/%s/status", key, pid)
	return nil
}
