package isolationtest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
)

// Containment is one thing a sandbox's code must not be able to do (or
// must see), checked by a command run inside it.
type Containment struct {
	Name, User, Cmd string
	Want            string // the command's stdout must contain this
}

// ContainmentCases are the containment cases every driver passes: a
// process inside cannot see the host's processes or read its files
// (secret is a host file), cannot mount, load modules, make devices, open
// raw sockets or make user namespaces, cannot write the host's /usr or
// the kernel's settings, cannot ptrace the agent, and runs as the user it
// asked for without privileges it was not given.
func ContainmentCases(id, secret string) []Containment {
	py := func(code string) string { return "python3 -c '" + code + "'" }
	return []Containment{
		{"sees only its own processes", "root", `ls /proc | grep -c "^[0-9]" | awk '{print ($1 < 10) ? "few" : "many: " $1}'`, "few"},
		{"the agent is its PID 1", "root", `tr "\\0" " " < /proc/1/cmdline`, "cove-"},
		{"cannot read host files", "root", "cat " + secret + " 2>&1; ls /work 2>&1", "No such file"},
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
		{"user is uid 1000 without capabilities", "user", "id -u; grep CapEff /proc/self/status", "1000\nCapEff:\t0000000000000000"},
		{"user cannot read /root", "user", "ls /root 2>&1", "Permission denied"},
		{"no_new_privs is set", "user", "grep NoNewPrivs /proc/self/status", "NoNewPrivs:\t1"},
		{"has its own hostname", "user", "hostname", id},
		{"bash, coreutils, python3 and node work", "user", "python3 -c 'print(6*7)'; node -e 'console.log(6*7)'; echo hi | tr a-z A-Z", "42\n42\nHI"},
	}
}

// HostSecret is a host file outside every template, removed when the test
// ends.
func HostSecret(t *testing.T) string {
	t.Helper()
	f, err := os.CreateTemp("/tmp", "cove-host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("host secret")
	f.Close()
	t.Cleanup(func() { os.Remove(f.Name()) })
	return f.Name()
}

// CheckContainment runs each case in the sandbox c reaches.
func CheckContainment(t *testing.T, c *agentclient.Client, cases []Containment) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.Run(ctx, tc.User, tc.Cmd, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res.Stdout), tc.Want) {
				t.Errorf("%s\nstdout %q\nstderr %q\nwant %q in stdout", tc.Cmd, res.Stdout, res.Stderr, tc.Want)
			}
		})
	}
}

func (s *suite) containment(t *testing.T) {
	t.Parallel()
	id, c := s.create(t, s.cfg.Spec(t))
	CheckContainment(t, c, ContainmentCases(id, HostSecret(t)))
}
