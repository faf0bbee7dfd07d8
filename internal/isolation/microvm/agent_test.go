package microvm

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/inside"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
)

// TestGuestAgent boots a sandbox's guest: a root from an erofs image
// (read-only, with a tmpfs for writes), the host's /usr shared read-only
// over virtiofs (as the base template binds it), eth0 on a tap in a
// network namespace of the test's own, and Cove's agent in it, which
// answers through the tap and runs the host's programs on the guest's
// kernel.
func TestGuestAgent(t *testing.T) {
	dir := t.TempDir()
	kit := newGuestKit(t, dir)
	k, qemu, initrd := kit.kernel, kit.qemu, kit.initrd

	// A root of a few files.
	root := filepath.Join(dir, "root")
	for p, data := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n",
		"etc/group":  "root:x:0:\nuser:x:1000:\n",
		"etc/motd":   "from the template\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"tmp", "root", "home/user", "usr"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} { // Debian's merged /usr
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img := filepath.Join(dir, "root.erofs")
	if err := MakeLayerImage(ctx, root, img); err != nil {
		t.Fatal(err)
	}

	settings, _ := json.Marshal(isolation.AgentSettings{DefaultUser: "user"})
	vmDir := filepath.Join(dir, "vm")
	if err := os.Mkdir(vmDir, 0o700); err != nil {
		t.Fatal(err)
	}
	vm, err := Start(ctx, VMSpec{
		Dir: vmDir, QEMU: qemu, Virtiofsd: "/usr/lib/qemu/virtiofsd",
		Machine: Machine{Kernel: k, Initrd: initrd, MemoryMB: 256, CPUs: 1, KVM: KVMAvailable()},
		Layers:  []string{img},
		Shares:  []HostShare{{Source: "/usr", Target: "/usr"}}, // read-only in the guest
		Guest: guest.Config{Hostname: "guest-test", WritableMB: 32, MemoryMB: 128, PIDs: 256, Agent: inside.AgentPath,
			AgentEnv: []string{"PATH=/usr/bin:/bin", "HOME=/root", inside.EnvSandboxEnv + "={}", inside.EnvAgentSettings + "=" + string(settings)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := vm.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("the guest's console:\n%s", vm.Console())
		}
		if left, _ := os.ReadDir(vmDir); len(left) != 0 {
			for _, e := range left {
				if e.IsDir() { // a share's mount point: empty once unmounted
					if err := os.Remove(filepath.Join(vmDir, e.Name())); err != nil {
						t.Errorf("a share's mount point after Stop: %v", err)
					}
				}
			}
		}
	}()

	// The agent answers through the tap.
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return vm.Dial(ctx, 49983)
	}}, Timeout: 5 * time.Second}
	start := time.Now()
	for {
		resp, err := client.Get("http://agent/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				break
			}
		}
		select {
		case <-vm.Done():
			t.Fatalf("the guest stopped before its agent answered: %v", err)
		default:
		}
		if time.Since(start) > 90*time.Second {
			t.Fatalf("the guest's agent did not answer in 90 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the guest's agent answered %v after QEMU started (KVM: %v)", time.Since(start).Round(time.Millisecond), KVMAvailable())
	resp, err := client.Get("http://agent/files?path=/etc/motd&username=root")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	if resp.StatusCode != 200 || body.String() != "from the template\n" {
		t.Errorf("a file of the template's disk: %d %q", resp.StatusCode, body.String())
	}

	// The host's programs, on the guest's kernel; writes go to the guest.
	agent := agentclient.New(func(ctx context.Context) (net.Conn, error) {
		return client.Transport.(*http.Transport).DialContext(ctx, "tcp", "")
	})
	defer agent.Close()
	res, err := agent.Run(ctx, "user", "uname -r; hostname; echo made > /tmp/new && cat /tmp/new; touch /usr/cove-guest-write 2>&1 || echo read-only", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("a command in the guest: %v %+v %s", err, res, res.Stderr)
	}
	if want := k.Release + "\nguest-test\nmade\n"; !strings.HasPrefix(string(res.Stdout), want) || !strings.Contains(string(res.Stdout), "read-only") {
		t.Errorf("the guest's command printed %q (%q), want %q and a refused write to /usr", res.Stdout, res.Stderr, want)
	}
	if _, err := os.Stat("/usr/cove-guest-write"); err == nil {
		os.Remove("/usr/cove-guest-write")
		t.Error("the guest wrote to the host's /usr")
	}
}

// TestStartFails: a guest that cannot start leaves no mount, process or
// namespace behind.
func TestStartFails(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		spec VMSpec
	}{
		{"a share that does not exist", VMSpec{Virtiofsd: "/usr/lib/qemu/virtiofsd", QEMU: "/nonexistent/qemu",
			Shares: []HostShare{{Source: "/usr", Target: "/usr"}, {Source: "/nonexistent", Target: "/x"}}}},
		{"no QEMU", VMSpec{Virtiofsd: "/usr/lib/qemu/virtiofsd", QEMU: "/nonexistent/qemu", Shares: []HostShare{{Source: "/usr", Target: "/usr"}}}},
	} {
		tc.spec.Dir = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.Mkdir(tc.spec.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := Start(t.Context(), tc.spec); err == nil {
			t.Errorf("%s: started", tc.name)
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), tc.spec.Dir) {
			t.Errorf("%s: a mount is left under %s", tc.name, tc.spec.Dir)
		}
		if out, _ := exec.Command("pgrep", "-f", tc.spec.Dir).Output(); len(out) > 0 {
			t.Errorf("%s: processes are left: %s", tc.name, out)
		}
	}
}
