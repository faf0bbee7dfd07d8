package namespaces

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
)

// TestContainment runs hostile commands inside one sandbox and checks each
// was stopped.
func TestContainment(t *testing.T) {
	for name, bin := range binaries() {
		t.Run(name, func(t *testing.T) { testContainment(t, bin) })
	}
}

func testContainment(t *testing.T, binary string) {
	e := testEnv(t)
	d := e.driverWith(t, binary)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := isolationtest.NewID()
	if _, err := d.Create(ctx, id, e.spec()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Destroy(context.Background(), id); err != nil {
			t.Error(err)
		}
	}()
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
	defer c.Close()

	secret, err := os.CreateTemp("/tmp", "cove-host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	secret.WriteString("host secret")
	secret.Close()
	defer os.Remove(secret.Name())

	py := func(code string) string { return "python3 -c '" + code + "'" }
	tests := []struct {
		name, user, cmd string
		want            string // the command's stdout must contain this
	}{
		{"sees only its own processes", "root", `ls /proc | grep -c "^[0-9]" | awk '{print ($1 < 10) ? "few" : "many: " $1}'`, "few"},
		{"the agent is its PID 1", "root", `tr "\\0" " " < /proc/1/cmdline`, "cove-"},
		{"cannot read host files", "root", "cat " + secret.Name() + " 2>&1; ls /work 2>&1", "No such file"},
		{"has its own /etc/shadow", "root", "grep -c host /etc/shadow; true", "0"},
		{"cannot mount", "root", "mount -t tmpfs none /mnt 2>&1; echo rc=$?", "rc=32"},
		{"mount syscall is EPERM", "root", py(`import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.mount(b"none", b"/mnt", b"tmpfs", 0, None), ctypes.get_errno())`), "-1 1"},
		{"cannot load kernel modules", "root", py(`import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.syscall(313, 0, b"", 0), ctypes.get_errno())`), "-1 1"},
		{"cannot write the host's /usr", "root", "touch /usr/cove-test 2>&1", "Read-only file system"},
		{"cannot make device nodes", "root", "mknod /tmp/sda b 8 0 2>&1; echo rc=$?", "rc=1"},
		{"cannot open raw sockets", "root", py(`import socket
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print("opened")
except PermissionError: print("denied")`), "denied"},
		{"cannot make a user namespace", "root", "unshare -U true 2>&1; echo rc=$?", "rc=1"},
		{"cannot write /proc/sys", "root", "echo 1 > /proc/sys/kernel/panic 2>&1; echo rc=$?", "rc=1"},
		{"cannot use bpf", "root", py(`import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.syscall(321, 0, 0, 0), ctypes.get_errno())`), "-1 1"},
		{"cannot ptrace the agent", "root", py(`import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.ptrace(16, 1, 0, 0), ctypes.get_errno())`), "-1 1"},
		{"has a minimal /dev", "root", "ls /dev | tr '\\n' ' '", "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero"},
		{"user is uid 1000 without capabilities", "user", "id -u; grep CapEff /proc/self/status", "1000\nCapEff:\t0000000000000000"},
		{"user cannot read /root", "user", "ls /root 2>&1", "Permission denied"},
		{"no_new_privs is set", "user", "grep NoNewPrivs /proc/self/status", "NoNewPrivs:\t1"},
		{"root has only the small capability set", "root", "grep -E 'CapEff|CapBnd' /proc/self/status", "CapEff:\t00000000200005fb\nCapBnd:\t00000000200005fb"},
		{"seccomp filters every process", "user", "grep Seccomp: /proc/self/status", "Seccomp:\t2"},
		{"its cgroup namespace is rooted at its own cgroup", "root", "cut -d: -f3 /proc/self/cgroup | sort -u | tr '\\n' ' '", "/ "},
		{"has its own hostname", "user", "hostname", id},
		{"bash, coreutils, python3 and node work", "user", "python3 -c 'print(6*7)'; node -e 'console.log(6*7)'; echo hi | tr a-z A-Z", "42\n42\nHI"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Run(ctx, tc.user, tc.cmd, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res.Stdout), tc.want) {
				t.Errorf("%s\nstdout %q\nstderr %q\nwant %q in stdout", tc.cmd, res.Stdout, res.Stderr, tc.want)
			}
		})
	}
}
