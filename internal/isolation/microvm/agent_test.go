package microvm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/agentclient"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
	"github.com/covesandbox/cove/internal/isolation/namespaces"
)

// TestGuestAgent boots a sandbox's guest: a root from an ext4 image
// (read-only, with a tmpfs for writes), the host's /usr shared read-only
// over virtiofs (as the base template binds it), eth0 on a tap in a
// network namespace of the test's own, and Cove's agent in it, which
// answers through the tap and runs the host's programs on the guest's
// kernel.
func TestGuestAgent(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("no qemu-system-x86_64: make test installs Debian's qemu-system-x86 (scripts/deps.sh)")
	}
	k, err := FindKernel(DefaultKernelDir)
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	sandboxBinary := filepath.Join(filepath.Dir(file), "../../../bin/cove-sandbox")
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initramfs.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteInitramfs(f, k, sandboxBinary); err != nil {
		t.Fatal(err)
	}
	f.Close()

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
	// The host's /usr, read-only, served by virtiofsd. The bind is
	// read-only, and unmounted (detached) before anything removes dir.
	usr := filepath.Join(dir, "usr")
	if err := os.Mkdir(usr, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/usr", usr, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(usr, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", usr, err)
		}
	})
	if err := unix.Mount("", usr, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img := filepath.Join(dir, "root.ext4")
	if err := MakeRootImage(ctx, root, img); err != nil {
		t.Fatal(err)
	}

	settings, _ := json.Marshal(isolation.AgentSettings{DefaultUser: "user"})
	cfg, _ := json.Marshal(guest.Config{
		Hostname: "guest-test", Address: "169.254.100.2/30", Gateway: "169.254.100.1", WritableMB: 32, Agent: namespaces.AgentPath,
		Shares:   []guest.Share{{Tag: "usr", Target: "/usr"}},
		AgentEnv: []string{"PATH=/usr/bin:/bin", "HOME=/root", namespaces.EnvSandboxEnv + "={}", namespaces.EnvAgentSettings + "=" + string(settings), namespaces.EnvNoFDs + "=1"},
	})
	cfgFile := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	// The guest's network: a tap in a namespace of its own.
	ns, err := hostproc.NewNetNS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	nsFile, host := os.NewFile(uintptr(ns), "netns"), hostNS(t)
	err = hostproc.InNetNS(nsFile, host, func() error {
		tap := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "tap0"}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_DEFAULTS}
		if err := netlink.LinkAdd(tap); err != nil {
			return fmt.Errorf("tap: %w", err)
		}
		for _, fd := range tap.Fds {
			fd.Close() // persistent: QEMU opens it by name
		}
		addr, _ := netlink.ParseAddr("169.254.100.1/30")
		if err := netlink.AddrAdd(tap, addr); err != nil {
			return err
		}
		return netlink.LinkSetUp(tap)
	})
	if err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(dir, "usr.sock")
	fsd := exec.CommandContext(ctx, "/usr/lib/qemu/virtiofsd", "--socket-path="+sock, "-o", "source="+usr, "-o", "cache=auto", "-o", "sandbox=namespace")
	fsdOut := &strings.Builder{}
	fsd.Stdout, fsd.Stderr = fsdOut, fsdOut
	if err := fsd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		fsd.Process.Kill()
		fsd.Wait()
		if t.Failed() {
			t.Logf("virtiofsd:\n%s", fsdOut)
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("virtiofsd made no socket: %s", fsdOut)
		}
	}

	cmd := exec.CommandContext(ctx, qemu, qemuArgs(Machine{Kernel: k, Initrd: initrd, MemoryMB: 256, CPUs: 1, KVM: KVMAvailable(),
		Disk: img, Config: cfgFile, Tap: "tap0", Shares: []Share{{Tag: "usr", Socket: sock}}})...)
	console, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := hostproc.InNetNS(nsFile, host, cmd.Start); err != nil { // QEMU in the namespace
		t.Fatal(err)
	}
	var lines []string
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(console)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		close(done)
	}()
	defer func() {
		cmd.Process.Kill()
		<-done
		cmd.Wait()
		if t.Failed() {
			t.Logf("the guest's console:\n%s", strings.Join(lines, "\n"))
		}
	}()

	// The agent answers through the tap.
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var c net.Conn
		err := hostproc.InNetNS(nsFile, host, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, "tcp", "169.254.100.2:49983")
			return err
		})
		return c, err
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
		case <-done:
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

// hostNS opens the test's own network namespace from a thread that was
// never moved (see hostproc.InNetNS).
func hostNS(t *testing.T) *os.File {
	t.Helper()
	h, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(h), "host-netns")
	t.Cleanup(func() { f.Close() })
	return f
}
