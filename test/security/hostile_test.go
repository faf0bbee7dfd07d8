package security_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// hostile is one attack: a program run in the attacking sandbox whose
// outcome is checked from outside it.
type hostile struct {
	name  string
	group string // escape, exhaustion, neighbour, host
	user  string // "root" or "user" (uid 1000)
	setup string // run as root first, in the same sandbox
	cmd   string
	want  []string // the output must hold each of these
	any   []string // and at least one of these
	deny  []string // and none of these
	// lasting attacks run in the background in a sandbox of their own
	// while the neighbour's command latency is measured, and end with
	// that sandbox.
	lasting bool
	// ready, for a lasting attack, is printed once it is under way.
	ready string
	// after checks the host or the neighbour once the attack ran.
	after func(t *testing.T, e *hostileEnv, out string)
	// mayEnd: the attack may end its own sandbox (which must then be gone
	// whole), as long as the neighbour and host are unaffected.
	mayEnd bool
	// gvisor, when set, is what the attack shows on the gVisor driver
	// instead: its calls reach gVisor's kernel, not the host's.
	gvisor *outcome
}

// outcome is what a case shows on one driver, and why it differs.
type outcome struct {
	why             string
	want, any, deny []string
	mayEnd          bool
	after           func(t *testing.T, e *hostileEnv, out string)
}

// hostileEnv is what the attacks aim at: the host, a neighbour sandbox and
// the server.
type hostileEnv struct {
	driver    string // the isolation driver the sandboxes run on
	srv       testutil.Server
	c         *cove.Client
	neighbour *cove.Sandbox
	attacker  *cove.Sandbox // where the cases that are not lasting run
	nbIP      string        // the neighbour's address
	gateway   string        // the host's end of a sandbox network
	apiPort   string
	secret    string // a host file
	loopback  *listener
	anyAddr   *listener
	anyAddr6  *listener // on "::", as Go's ":port" listeners, sshd and most daemons are
	// hostLinkLocal are the IPv6 link-local addresses the host's ends of
	// sandbox links would have (EUI-64, from their MACs).
	hostLinkLocal []string
}

// py runs a Python program (from the host's /usr) with helpers for raw
// system calls: sc(nr, args...) prints "ok" or "errno=N".
func py(code string) string {
	return "python3 - <<'EOF'\n" + `import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def arg(a):
    return ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a)
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[arg(x) for x in a])
    return "ok" if r >= 0 else "errno=%d" % ctypes.get_errno()
` + code + "\nEOF"
}

func hostileCases(e *hostileEnv) []hostile {
	secretDir := e.secret[:strings.LastIndex(e.secret, "/")]
	return []hostile{
		// Escapes: the mount family, namespaces, the kernel's interfaces.
		{name: "mount a tmpfs", group: "escape", user: "root", cmd: py(`print("mount", sc(165, b"none", b"/mnt", b"tmpfs", 0, 0))`), want: []string{"mount errno=1"}},
		{name: "remount the root read-write", group: "escape", user: "root", cmd: py(`print("remount", sc(165, b"", b"/usr", b"", 32|4096, 0))`), want: []string{"remount errno=1"}},
		{name: "unmount /proc to see the host's", group: "escape", user: "root", cmd: py(`print("umount", sc(166, b"/proc", 2))`), want: []string{"umount errno=1"}},
		{name: "pivot_root", group: "escape", user: "root", cmd: py(`print("pivot", sc(155, b"/tmp", b"/tmp"))`), want: []string{"pivot errno=1"}},
		{name: "chroot out of the root (the classic escape)", group: "escape", user: "root", cmd: py(`os.makedirs("/tmp/jail", exist_ok=True); print("chroot", sc(161, b"/tmp/jail"))`), want: []string{"chroot errno=1"}},
		{name: "the new mount API (fsopen, open_tree)", group: "escape", user: "root", cmd: py(`print("fsopen", sc(430, b"tmpfs", 0)); print("open_tree", sc(428, -100, b"/", 1))`), want: []string{"fsopen errno=1", "open_tree errno=1"}},
		{name: "a new user namespace", group: "escape", user: "user", cmd: py(`print("userns", sc(272, 0x10000000))`), want: []string{"userns errno=1"}},
		{name: "a new mount namespace", group: "escape", user: "root", cmd: py(`print("mntns", sc(272, 0x00020000))`), want: []string{"mntns errno=1"}},
		{name: "join another namespace (setns)", group: "escape", user: "root", cmd: py(`fd = os.open("/proc/self/ns/mnt", os.O_RDONLY); print("setns", sc(308, fd, 0))`), want: []string{"setns errno=1"}},
		{name: "ptrace the agent", group: "escape", user: "root", cmd: py(`print("ptrace", sc(101, 16, 1, 0, 0))`), want: []string{"ptrace errno=1"}},
		{name: "write the agent's memory (process_vm_writev)", group: "escape", user: "root", cmd: py(`print("vmwrite", sc(311, 1, 0, 0, 0, 0, 0))`), want: []string{"vmwrite errno=1"}},
		{name: "write /proc/sys", group: "escape", user: "root", cmd: "echo 1 > /proc/sys/kernel/panic; echo rc=$?; echo x > /proc/sys/kernel/hostname; echo rc=$?", want: []string{"Read-only file system"}, deny: []string{"rc=0"},
			gvisor: &outcome{why: "gVisor's /proc/sys is its own kernel's, which refuses both writes", want: []string{"rc=1\nrc=1"}, deny: []string{"rc=0"}}},
		{name: "trigger sysrq", group: "escape", user: "root", cmd: "echo b > /proc/sysrq-trigger; stat -c 'sysrq-trigger is dev=%t,%T' /proc/sysrq-trigger",
			any:    []string{"dev=1,3", "cannot statx '/proc/sysrq-trigger': No such file"},
			gvisor: &outcome{why: "gVisor's own /proc/sysrq-trigger fails the write; the host's is not there to reach", want: []string{"write error", "dev=0,0"}}},
		{name: "read kernel memory and symbols", group: "escape", user: "root", cmd: "echo kcore=$(head -c 64 /proc/kcore | wc -c) kallsyms=$(wc -c < /proc/kallsyms); ls /dev/mem /dev/kmem /dev/port 2>&1", want: []string{"kcore=0 kallsyms=0", "cannot access '/dev/mem': No such file"},
			gvisor: &outcome{why: "gVisor has neither /proc/kcore nor /proc/kallsyms", want: []string{"cannot open '/proc/kcore' for reading: No such file", "/proc/kallsyms: No such file", "cannot access '/dev/mem': No such file"}}},
		{name: "reach sysfs", group: "escape", user: "root", cmd: "ls /sys/class/net /sys/kernel 2>&1 | head -3; " + py(`print("sysfs", sc(165, b"sysfs", b"/mnt", b"sysfs", 0, 0))`), want: []string{"No such file", "sysfs errno=1"}},
		{name: "load a kernel module", group: "escape", user: "root", cmd: py(`print("init", sc(175, 0, 0, b"")); print("finit", sc(313, 0, b"", 0)); print("delete", sc(176, b"ext4", 0))`), want: []string{"init errno=1", "finit errno=1", "delete errno=1"}},
		{name: "kexec a new kernel", group: "escape", user: "root", cmd: py(`print("kexec", sc(246, 0, 0, 0, 0))`), want: []string{"kexec errno=1"}},
		{name: "reboot the host", group: "escape", user: "root", cmd: py(`print("reboot", sc(169, 0xfee1dead, 672274793, 0x1234567, 0))`), want: []string{"reboot errno=1"}},
		{name: "set the host's clock", group: "escape", user: "root", cmd: py(`import struct; ts = ctypes.create_string_buffer(struct.pack("qq", 0, 0)); print("clock", libc.clock_settime(0, ts), ctypes.get_errno())`), want: []string{"clock -1 1"}},
		{name: "raw and packet sockets", group: "escape", user: "root", cmd: py(`
for fam, typ, proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP), (socket.AF_PACKET, socket.SOCK_RAW, 0x0300)):
    try:
        socket.socket(fam, typ, proto); print("opened")
    except PermissionError:
        print("denied")`), want: []string{"denied\ndenied"}, deny: []string{"opened"}},
		{name: "load a BPF program", group: "escape", user: "root", cmd: py(`print("bpf", sc(321, 5, 0, 0))`), want: []string{"bpf errno=1"}},
		{name: "perf events", group: "escape", user: "root", cmd: py(`print("perf", sc(298, 0, 0, -1, -1, 0))`), want: []string{"perf errno=1"}},
		{name: "kernel keyrings", group: "escape", user: "user", cmd: py(`print("keyctl", sc(250, 0, -3, 1)); print("add_key", sc(248, b"user", b"k", b"v", 1, -3))`), want: []string{"keyctl errno=1", "add_key errno=1"}},
		{name: "userfaultfd", group: "escape", user: "user", cmd: py(`print("uffd", sc(323, 0))`), want: []string{"uffd errno=1"}},
		{name: "io_uring", group: "escape", user: "user", cmd: py(`buf = ctypes.create_string_buffer(120); print("uring", sc(425, 8, ctypes.addressof(buf)))`), want: []string{"uring errno=1"}},
		{name: "file handles (the shocker escape)", group: "escape", user: "root", cmd: py(`buf = ctypes.create_string_buffer(136); print("handle", sc(304, -100, ctypes.addressof(buf), 0))`), want: []string{"handle errno=1"}},
		{name: "the x32 system call ABI around the filter", group: "escape", user: "user", cmd: py(`print("x32", sc(0x40000000 | 250, 0, -3, 1))`), deny: []string{"x32 ok"}, want: []string{"x32 errno="}},
		{name: "the i386 system call ABI around the filter (int 0x80)", group: "escape", user: "user", cmd: py(`import mmap
# push rbx; mov eax, 288 (keyctl); mov ebx, 0; mov ecx, -3; mov edx, 1; int 0x80; pop rbx; ret
code = bytes.fromhex("53" "b820010000" "bb00000000" "b9fdffffff" "ba01000000" "cd80" "5b" "c3")
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
r = fn()
print("i386", "ok" if r >= 0 else "errno=%d" % -r)`), deny: []string{"i386 ok"}},
		{name: "make device nodes", group: "escape", user: "root", cmd: "mknod /tmp/sda b 8 0; echo rc=$?; mknod /tmp/mem c 1 1; echo rc=$?", want: []string{"Operation not permitted"}, deny: []string{"rc=0"}},
		{name: "a setuid-root copy of python, made by root, run by the user", group: "escape",
			setup: "cp /usr/bin/python3 /tmp/py-suid && chmod 4755 /tmp/py-suid && ls -l /tmp/py-suid",
			user:  "user", cmd: "/tmp/py-suid -c 'import os; print(\"euid\", os.geteuid())'",
			want: []string{"euid 1000"}},
		{name: "file capabilities on a copy, run by the user", group: "escape",
			setup: "cp /usr/bin/python3 /tmp/py-cap && " + py(`import struct
os.setxattr("/tmp/py-cap", "security.capability", struct.pack("<IIIII", 0x02000001, 1 << 21, 0, 0, 0))`),
			user: "user", cmd: "/tmp/py-cap -c 'print(open(\"/proc/self/status\").read())' | grep CapEff",
			want: []string{"CapEff:\t0000000000000000"}},
		{name: "sudo from an account that may not, and with forged credentials", group: "escape", user: "root",
			cmd: py(`import json, socket, struct
os.setgroups([]); os.setgid(65534); os.setuid(65534)
def ask(creds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect("\0cove-sudo")
    anc = [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("iII", *creds))]
    anc.append((socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("iii", 0, 1, 2)))
    s.sendmsg([json.dumps({"argv": ["id", "-u"]}).encode()], anc)
    return s.recv(4096).decode()
try:
    print("forged", ask((os.getpid(), 0, 0)))
except OSError as e:
    print("forged errno=%d" % e.errno)
print("own", ask((os.getpid(), 65534, 65534)))`),
			want: []string{"forged errno=1", "may not use sudo"}, deny: []string{"started"}},
		{name: "become root from the user (setuid 0)", group: "escape", user: "user", cmd: py(`print("setuid", sc(105, 0)); print("uid", os.getuid())`), want: []string{"setuid errno=1", "uid 1000"}},
		{name: "the host's files through /proc/self/root and symlinks", group: "escape", user: "root",
			cmd:  "readlink /proc/self/root; cat /proc/self/root" + e.secret + " 2>&1; ln -sf " + e.secret + " /tmp/host-link; cat /tmp/host-link 2>&1; ls " + secretDir + " 2>&1 | grep -c cove-host-secret",
			want: []string{"/\n", "No such file"}, deny: []string{"host secret"}},
		{name: "a cgroup file system (release_agent)", group: "escape", user: "root",
			cmd:    "ls /sys/fs/cgroup 2>&1; cut -d: -f3 /proc/self/cgroup | sort -u; " + py(`print("cgroupfs", sc(165, b"cgroup", b"/mnt", b"cgroup", 0, b"memory"))`),
			want:   []string{"No such file", "cgroupfs errno=1"},
			gvisor: &outcome{why: "gVisor shows an empty /sys/fs/cgroup of its own; the mount is refused", want: []string{"cgroupfs errno=1"}, deny: []string{"release_agent"}}},
		{name: "change the host's name", group: "escape", user: "root", cmd: "hostname evil 2>&1; hostname", deny: []string{"evil\n"}},
		{name: "kernel addresses and build details in /proc", group: "escape", user: "root",
			cmd:  "for f in slabinfo vmallocinfo config.gz modules iomem; do echo $f=$(head -c 256 /proc/$f 2>/dev/null | wc -c); done; echo kptr=$(cat /proc/sys/kernel/kptr_restrict 2>/dev/null)",
			want: []string{"slabinfo=0", "vmallocinfo=0", "config.gz=0", "modules=0", "iomem=0"}, deny: []string{"kptr=0"}},
		{name: "the kernel log", group: "escape", user: "root", cmd: "dmesg 2>&1 | head -2; ls /dev/kmsg 2>&1", want: []string{"Operation not permitted", "No such file"}},

		// The sandbox's own root, through the files API: a link planted by
		// the user, then a file operation the sandbox's owner makes as that
		// user.
		{name: "files API: an upload through a link the user planted", group: "escape",
			setup: "echo root-only > /etc/cove-protected && chmod 644 /etc/cove-protected",
			user:  "user", cmd: "ln -sf /etc/cove-protected ~/report.txt && echo planted",
			want: []string{"planted"}, after: e.uploadThroughLink},
		{name: "files API: missing directories made through a link the user planted", group: "escape",
			setup: "chmod 700 /root",
			user:  "user", cmd: "ln -sfn /etc ~/into && echo planted",
			want: []string{"planted"}, after: e.parentsThroughLink},
		{name: "files API: read root's home as the user", group: "escape",
			setup: "echo root-secret > /root/secret && chmod 700 /root",
			user:  "user", cmd: "ls /root 2>&1; true", want: []string{"Permission denied"},
			after: e.listRootAsUser},

		// Exhaustion: each in a sandbox of its own, the neighbour timed meanwhile.
		{name: "memory: allocate past the limit, again and again", group: "exhaustion", user: "user", lasting: true, ready: "allocating",
			cmd: "echo allocating; while :; do " + py(`chunks = []
while True:
    chunks.append(bytearray(64 << 20))`) + "\ndone",
			want: []string{"Killed"},
			gvisor: &outcome{why: "the host's OOM killer takes the hog's stub (its score is raised), but gVisor's kernel holds the memory until it sees the end, and the killer may go on to the agent's stub: the sandbox may end (reported as out of memory; gVisor #2533)",
				mayEnd: true}},
		// The agent marks a process just after it starts it (what the
		// process forks before that keeps 0: docs/SECURITY.md); under load
		// the shell's first fork beat it once, so the case reads after a
		// moment.
		{name: "OOM: the sandbox's processes go before its agent", group: "exhaustion", user: "user",
			cmd: "sleep 0.5; echo self=$(cat /proc/self/oom_score_adj) agent=$(cat /proc/1/oom_score_adj)", want: []string{"self=500 agent=0"}},
		{name: "pids: a fork bomb", group: "exhaustion", user: "user", lasting: true, ready: "bombing",
			cmd: "echo bombing; bomb() { bomb | bomb & }; bomb; sleep 30",
			// The agent shares the sandbox's pids limit: when the Go
			// runtime needs a thread while the bomb holds every pid, the
			// agent ends (reported as crashed), and the sandbox with it.
			mayEnd: true},
		{name: "CPU: a busy loop on every core", group: "exhaustion", user: "user", lasting: true, ready: "burning",
			cmd: "echo burning; for i in 1 2 3 4 5 6 7 8; do (while :; do :; done) & done; wait"},
		{name: "read /proc/meminfo in a loop on every core (lxcfs serves it)", group: "exhaustion", user: "user", lasting: true, ready: "reading",
			cmd: "echo reading; for i in 1 2 3 4 5 6 7 8; do (while :; do cat /proc/meminfo /proc/stat /proc/cpuinfo >/dev/null; done) & done; wait"},
		{name: "disk: fill the writable layer", group: "exhaustion", user: "user", lasting: true, ready: "filling",
			cmd:  "echo filling; dd if=/dev/zero of=/tmp/fill bs=1M; echo dd-rc=$?; sleep 30",
			deny: []string{"dd-rc=0"}},
		{name: "inodes: create files until none are left", group: "exhaustion", user: "user",
			cmd: py(`os.makedirs("/tmp/many", exist_ok=True)
n = 0
try:
    while n < 2000000:
        open("/tmp/many/%d" % n, "w").close(); n += 1
except OSError as e:
    print("stopped", e.strerror)
print("files", n)`),
			want: []string{"stopped No space left on device"}},
		{name: "open files: until the descriptor limit", group: "exhaustion", user: "user",
			cmd: py(`import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
print("limit", hard)
fds = []
try:
    while len(fds) < 10000000:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print("stopped", e.strerror)
print("fds", len(fds))`),
			want: []string{"stopped Too many open files"},
			after: func(t *testing.T, e *hostileEnv, out string) {
				var n int
				fmt.Sscan(field(strings.ReplaceAll(out, "fds ", "fds="), "fds"), &n)
				if n > 1<<20 {
					t.Errorf("opened %d files", n)
				}
			}},
		{name: "/dev/shm: fill it", group: "exhaustion", user: "user", cmd: "dd if=/dev/zero of=/dev/shm/fill bs=1M 2>&1 | grep -E 'No space|copied'; rm -f /dev/shm/fill", want: []string{"No space left on device"}},
		{name: "PTYs: take every one", group: "exhaustion", user: "user",
			cmd: py(`fds = []
try:
    while len(fds) < 10000:
        fds.extend(os.openpty())
except OSError as e:
    print("stopped", e.strerror)
print("ptys", len(fds) // 2)
` + holdUntil("/tmp/pty-release")),
			want:   []string{"stopped", "ptys 64\n"},
			after:  e.neighbourGetsPTY,
			gvisor: &outcome{why: "gVisor's PTYs are its own kernel's: they take none of the host's pool", after: e.neighbourGetsPTY}},
		{name: "socket memory: fill TCP buffers and hold them", group: "exhaustion", user: "user",
			cmd: py(`ls = socket.socket()
ls.bind(("127.0.0.1", 0)); ls.listen(4096)
held, queued, stopped, chunk = [], 0, "at the case's bound", b"x" * 65536
try:
    while queued < (768 << 20) and len(held) < 2000:
        c = socket.create_connection(ls.getsockname()); a, _ = ls.accept()
        for x in (c, a):
            x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            x.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        c.setblocking(False); held += [c, a]
        while queued < (768 << 20):
            try:
                queued += c.send(chunk)
            except BlockingIOError:
                break
except OSError as e:
    stopped = e.strerror
print("queued", queued >> 20, "MiB in", len(held) // 2, "connections; stopped:", stopped)
` + holdUntil("/tmp/tcp-release")),
			want:  []string{"queued"},
			after: e.hostTCPMemoryBounded},
		{name: "per-user limits: every inotify instance of its root", group: "exhaustion", user: "root",
			cmd: py(`fds = []
try:
    while len(fds) < 100000:
        fd = libc.inotify_init1(0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        fds.append(fd)
except OSError as e:
    print("stopped", e.strerror)
print("instances", len(fds))
` + holdUntil("/tmp/inotify-release")),
			want:  []string{"stopped Too many open files"},
			after: e.othersGetInotify,
			gvisor: &outcome{why: "gVisor's inotify is its own kernel's: the host's per-user counts are not touched; the sandbox's descriptor limit stops it",
				want: []string{"instances"}, after: e.othersGetInotify}},
		{name: "output: flood the agent", group: "exhaustion", user: "user", lasting: true, ready: "flooding",
			cmd: "echo flooding; yes 'the quick brown fox jumps over the lazy dog'"},

		// Neighbours: another sandbox's files, processes and traffic.
		{name: "a neighbour's files", group: "neighbour", user: "root",
			cmd:  "find / -xdev -name 'neighbour-secret*' 2>/dev/null | head; grep -rl neighbour-data /tmp /home /root 2>/dev/null; echo searched",
			want: []string{"searched"}, deny: []string{"neighbour-secret", "neighbour-data"}},
		{name: "a neighbour's processes", group: "neighbour", user: "root",
			cmd: py(`import glob
seen = sum(1 for p in glob.glob("/proc/[0-9]*/cmdline") if b"sleep\x0086400" in open(p, "rb").read())
print("neighbour processes seen:", seen)`),
			want: []string{"neighbour processes seen: 0"}},
		{name: "signal every process it can (kill -9 -1)", group: "neighbour", user: "root", cmd: "kill -9 -1; echo survived"},
		{name: "a neighbour's services", group: "neighbour", user: "root",
			cmd:  "for p in 49983 8000; do curl -s -m 2 http://" + e.nbIP + ":$p/ && echo reached || echo unreachable; done",
			want: []string{"unreachable\nunreachable"}, deny: []string{"reached\n", "neighbour-data"}},
		{name: "sniff: promiscuous mode and a packet socket", group: "neighbour", user: "root",
			cmd: "ip link set eth0 promisc on 2>&1; " + py(`
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300); print("sniffing")
except PermissionError:
    print("denied")`),
			want: []string{"Operation not permitted", "denied"}, deny: []string{"sniffing"}},
		{name: "ARP spoofing: claim the gateway", group: "neighbour", user: "root",
			cmd:  "ip neigh replace " + e.gateway + " lladdr 02:00:00:00:00:01 dev eth0 2>&1; echo rc=$?",
			want: []string{"Operation not permitted"}, deny: []string{"rc=0"}},
		{name: "IP spoofing: take the neighbour's address", group: "neighbour", user: "root",
			cmd: "ip addr add " + e.nbIP + "/32 dev eth0 2>&1; echo rc=$?; " + py(`
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND
try:
    s.bind(("`+e.nbIP+`", 5353))
    s.sendto(b"spoofed", ("`+e.gateway+`", 53)); print("sent")
except OSError as err:
    print("refused", err.strerror)`),
			want: []string{"Operation not permitted", "refused"}, deny: []string{"rc=0", "sent"}},

		// The host: its loopback services, its API, its files, the metadata service.
		{name: "the host's loopback services", group: "host", user: "root",
			cmd:  "curl -s -m 2 http://127.0.0.1:" + e.loopback.port() + "/ || echo unreachable",
			want: []string{"unreachable"}, deny: []string{"host service"},
			after: func(t *testing.T, e *hostileEnv, _ string) {
				if n := e.loopback.accepted.Load(); n > 0 {
					t.Errorf("the host's loopback service accepted %d connections", n)
				}
			}},
		{name: "the host's services through the gateway", group: "host", user: "root",
			cmd:  "curl -s -m 2 http://" + e.gateway + ":" + e.anyAddr.port() + "/ || echo unreachable",
			want: []string{"unreachable"}, deny: []string{"host service"},
			after: func(t *testing.T, e *hostileEnv, _ string) {
				if n := e.anyAddr.accepted.Load(); n > 0 {
					t.Errorf("the host's service accepted %d connections", n)
				}
			}},
		{name: "the host's services over IPv6 (link-local)", group: "host", user: "root",
			cmd: "cat /proc/net/if_inet6 2>&1; " + py(`for ll in "`+strings.Join(e.hostLinkLocal, " ")+`".split():
    for port in (`+e.anyAddr6.port()+`, 22):
        try:
            socket.create_connection((ll + "%eth0", port), timeout=1); print("reached", ll, port)
        except OSError as err:
            print("refused", ll, port, err.strerror)`),
			want: []string{"refused"}, deny: []string{"reached", "eth0\n"},
			after: func(t *testing.T, e *hostileEnv, _ string) {
				if n := e.anyAddr6.accepted.Load(); n > 0 {
					t.Errorf("the host's IPv6 service accepted %d connections", n)
				}
			}},
		{name: "the API port", group: "host", user: "root",
			cmd:  "curl -s -m 2 http://" + e.gateway + ":" + e.apiPort + "/health || echo unreachable; curl -s -m 2 http://127.0.0.1:" + e.apiPort + "/health || echo unreachable",
			want: []string{"unreachable\nunreachable"}},
		{name: "the cloud metadata service", group: "host", user: "root",
			cmd:  "curl -s -m 2 http://" + testutil.MetadataAddr + "/ || echo unreachable",
			want: []string{"unreachable"}, deny: []string{"hello from"}},
		{name: "the host's files and the node's data", group: "host", user: "root",
			cmd:  "cat " + e.secret + " 2>&1; ls " + e.srv.DataDir + " 2>&1; ls /var/lib/cove 2>&1",
			want: []string{"No such file"}, deny: []string{"host secret", "cove.db"}},
	}
}

// TestHostile runs every attack against a real server and checks, from
// outside, that each was contained and that the host and a neighbour
// sandbox were unaffected.
func TestHostile(t *testing.T) {
	for _, driver := range []string{"namespaces", "gvisor", "microvm"} {
		t.Run(driver, func(t *testing.T) {
			if driver == "microvm" && !long() {
				// About 6 minutes under TCG; the conformance suite's
				// containment cases run on guests in make test.
				t.Skip("the hostile suite on guests runs in make test-long (COVE_LONG)")
			}
			hostileOn(t, driver)
		})
	}
}

// starved is the neighbour's command latency during a lasting attack, as a
// multiple of its quiet latency, that fails the case.
const starved = 10

// hostileRange is where the hostile suite's sandboxes get addresses.
const hostileRange = "198.19.244.0/24"

// linkLocals lists the EUI-64 link-local addresses of the host's links
// whose names start with prefix: what an attacker would compute from the
// gateway's MAC.
func linkLocals(t *testing.T, prefix string) []string {
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		mac := l.Attrs().HardwareAddr
		if !strings.HasPrefix(l.Attrs().Name, prefix) || len(mac) != 6 {
			continue
		}
		out = append(out, fmt.Sprintf("fe80::%02x%02x:%02xff:fe%02x:%02x%02x", mac[0]^2, mac[1], mac[2], mac[3], mac[4], mac[5]))
	}
	if len(out) == 0 {
		t.Fatalf("no host link named %s*", prefix)
	}
	return out
}

func hostileOn(t *testing.T, driver string) {
	if driver == "gvisor" {
		testutil.NeedRunsc(t)
	}
	srv := testutil.StartServer(t, apiKey, "--network=true", "--network-range", hostileRange, "--default-isolation", driver)
	testutil.FakeInternet(t)
	// A bound on the whole suite, not a measure: its cases on guests
	// under TCG took past 10 minutes.
	limit := 10 * time.Minute
	if driver == "microvm" {
		limit = 25 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	e := &hostileEnv{driver: driver, srv: srv, c: client(t, srv)}
	_, e.apiPort, _ = strings.Cut(srv.Addr, ":")
	secret, err := os.CreateTemp("", "cove-host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	secret.WriteString("host secret")
	secret.Close()
	e.secret = secret.Name()
	t.Cleanup(func() { os.Remove(e.secret) })
	e.loopback = listen(t, "127.0.0.1:0")
	e.anyAddr = listen(t, "0.0.0.0:0")
	e.anyAddr6 = listen(t, "[::]:0")

	nb, err := e.c.Create(ctx, cove.CreateOptions{Timeout: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Kill(context.Background())
	e.neighbour = nb
	mustRun(t, ctx, nb, "user", "echo neighbour-data > /tmp/neighbour-secret; (setsid sleep 86400 >/dev/null 2>&1 &); "+
		"(setsid python3 -m http.server 8000 -d /tmp >/dev/null 2>&1 &); true")
	e.nbIP = strings.TrimSpace(mustRun(t, ctx, nb, "user", "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1 | head -1").out) // a guest's first: the sandbox's
	e.gateway = strings.TrimSpace(mustRun(t, ctx, nb, "user", "ip route | awk '/default/ {print $3}'").out)
	if e.nbIP == "" || e.gateway == "" {
		t.Fatalf("neighbour address %q, gateway %q", e.nbIP, e.gateway)
	}
	latency(t, ctx, nb, 5) // warm up

	attacker, err := e.c.Create(ctx, cove.CreateOptions{Timeout: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Kill(context.Background())
	e.attacker = attacker
	// Controls: what the attacks find unreachable is there to be reached.
	if r := mustRun(t, ctx, nb, "user", "for i in $(seq 50); do curl -s -m 1 http://127.0.0.1:8000/ && break; sleep 0.1; done"); !strings.Contains(r.out, "neighbour-secret") {
		t.Fatalf("the neighbour's own service does not answer it: %q", r.out)
	}
	if r := mustRun(t, ctx, attacker, "user", "curl -s -m 3 http://"+testutil.InternetAddr+":8080/"); !strings.Contains(r.out, "hello from") {
		t.Fatalf("the attacker cannot reach the fake internet: %q", r.out)
	}

	e.hostLinkLocal = linkLocals(t, network.InterfacePrefix(netip.MustParsePrefix(hostileRange)))
	cases := hostileCases(e)
	if len(cases) < 40 {
		t.Fatalf("%d cases, the suite promises at least 40", len(cases))
	}
	for _, hc := range cases {
		t.Run(hc.group+"/"+hc.name, func(t *testing.T) {
			if e.driver == "gvisor" && hc.gvisor != nil {
				t.Logf("on gVisor: %s", hc.gvisor.why)
			}
			hc := hc.on(e.driver)
			var out string
			if hc.lasting {
				out = e.lasting(t, ctx, hc)
			} else {
				if hc.setup != "" { // it may fail: the case checks what follows
					r := mustRun(t, ctx, attacker, "root", hc.setup)
					t.Logf("setup (exit %d): %s", r.code, r.out)
				}
				r, err := run(ctx, attacker, hc.user, hc.cmd, 2*time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				out = r.out
			}
			t.Logf("output: %.400s", out)
			for _, w := range hc.want {
				if !strings.Contains(out, w) {
					t.Errorf("want %q in the output:\n%s", w, out)
				}
			}
			if len(hc.any) > 0 && !slices.ContainsFunc(hc.any, func(a string) bool { return strings.Contains(out, a) }) {
				t.Errorf("want one of %q in the output:\n%s", hc.any, out)
			}
			for _, d := range hc.deny {
				if strings.Contains(out, d) {
					t.Errorf("%q in the output:\n%s", d, out)
				}
			}
			if hc.after != nil {
				hc.after(t, e, out)
			}
			e.unaffected(t, ctx)
		})
	}
}

// on returns the case as it is expected to go on driver.
func (hc hostile) on(driver string) hostile {
	if driver != "gvisor" || hc.gvisor == nil {
		return hc
	}
	o := hc.gvisor
	hc.want, hc.any, hc.deny, hc.mayEnd, hc.after = o.want, o.any, o.deny, o.mayEnd, o.after
	return hc
}

// lasting runs an attack in a sandbox of its own, measures the neighbour's
// latency while it runs, and ends the sandbox (which must go, whatever
// runs in it). It returns what the attack printed.
func (e *hostileEnv) lasting(t *testing.T, ctx context.Context, hc hostile) string {
	// Quiet, just before: other tests may share this machine's two cores.
	quiet := latency(t, ctx, e.neighbour, 9)
	sb, err := e.c.Create(ctx, cove.CreateOptions{Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex // out and seen: the callbacks run on the stream's goroutine
		out     strings.Builder
		seen    bool
		total   atomic.Int64
		started = make(chan struct{})
	)
	begin := time.Now()
	record := func(b []byte) {
		total.Add(int64(len(b)))
		mu.Lock()
		defer mu.Unlock()
		if out.Len() < 1<<16 {
			out.Write(b)
		}
		if !seen && strings.Contains(out.String(), hc.ready) {
			seen = true
			close(started)
		}
	}
	h, err := sb.Commands.Start(ctx, hc.cmd, cove.WithUser(hc.user), cove.OnStdout(record), cove.OnStderr(record))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("the attack did not start")
	}
	time.Sleep(500 * time.Millisecond) // under way
	// The neighbour's latency during the attack, in up to five windows
	// (this VM's own noise is not the attack's): logged, for the record;
	// the test fails only on starvation. A finer bound is a timing
	// assertion that other tests on a loaded two-core machine break.
	var ratio float64
	for range 5 {
		ratio = float64(latency(t, ctx, e.neighbour, 9)) / float64(quiet)
		if ratio <= 2 {
			break
		}
	}
	t.Logf("neighbour's command latency during the attack: %.2f× quiet (%v; the attack's output so far: %.1f MB/s)",
		ratio, quiet, float64(total.Load())/time.Since(begin).Seconds()/1e6)
	if ratio > starved {
		t.Errorf("the neighbour's commands took %.2f× their quiet time during the attack", ratio)
	}
	// What the attack is expected to show (an OOM kill …) may take a while
	// on a busy machine: wait for it before ending the sandbox.
	testkit.Wait(30*time.Second, func() bool {
		mu.Lock()
		got := out.String()
		mu.Unlock()
		return !slices.ContainsFunc(hc.want, func(w string) bool { return !strings.Contains(got, w) })
	})
	// The attacking sandbox's agent still answers its owner (without a new
	// process: a fork bomb leaves none to start) and the sandbox goes when
	// killed.
	ended := false
	if _, err := sb.Commands.List(ctx); err != nil {
		if !hc.mayEnd {
			t.Errorf("the attacking sandbox's agent no longer answers: %v", err)
		}
		t.Logf("the attack ended its own sandbox: %v", err)
		ended = true
	}
	done := make(chan struct{})
	go func() { h.Wait(ctx); close(done) }()
	if err := sb.Kill(ctx); err != nil && !(ended && errors.Is(err, cove.ErrNotFound)) {
		t.Fatalf("kill the attacking sandbox: %v", err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("the attack's stream did not end with its sandbox")
	}
	if left := e.srv.Leftovers(); containsPrefix(left, sb.ID) {
		t.Errorf("the killed sandbox left %v", left)
	}
	mu.Lock()
	defer mu.Unlock()
	return out.String()
}

// holdUntil is Python that keeps what the program opened (its
// descriptors) in a child of its own after the program exits, until the
// file release exists (at most a minute): the case's after hook checks the
// host and the neighbour meanwhile, then creates the file.
func holdUntil(release string) string {
	return `
sys.stdout.flush()
if os.fork() == 0:
    os.setsid()
    for f in (0, 1, 2):  # the command's streams end; no new descriptor (none may be left)
        os.close(f)
    import time
    for _ in range(600):
        if os.path.exists("` + release + `"):
            break
        time.sleep(0.1)
    os._exit(0)`
}

// neighbourGetsPTY checks, while an attack holds every PTY it could open,
// that the neighbour can still open one, then lets the attack go.
func (e *hostileEnv) neighbourGetsPTY(t *testing.T, _ *hostileEnv, _ string) {
	ctx := context.Background()
	r := mustRun(t, ctx, e.neighbour, "user", "python3 -c 'import os; os.openpty(); print(\"neighbour pty ok\")' 2>&1")
	if !strings.Contains(r.out, "neighbour pty ok") {
		t.Errorf("the neighbour could not open a PTY: %s", r.out)
	}
	mustRun(t, ctx, e.attacker, "user", "touch /tmp/pty-release")
}

// hostTCPMemoryBounded checks, while an attack holds all the TCP buffers
// it could fill, that the host's TCP memory (all namespaces) stays within
// the sandbox's share (a quarter of its 512 MiB) and some slack for the
// rest of the host, then lets the attack go.
func (e *hostileEnv) hostTCPMemoryBounded(t *testing.T, _ *hostileEnv, out string) {
	defer mustRun(t, context.Background(), e.attacker, "user", "touch /tmp/tcp-release")
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		t.Fatal(err)
	}
	var pages int64
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "TCP:" {
			for i := 1; i+1 < len(f); i++ {
				if f[i] == "mem" {
					pages, _ = strconv.ParseInt(f[i+1], 10, 64)
				}
			}
		}
	}
	held := pages * int64(os.Getpagesize())
	t.Logf("the host's TCP memory while the attack holds its buffers: %d MiB", held>>20)
	if held > 256<<20 {
		t.Errorf("the host's TCP memory is %d MiB while one sandbox of 512 MiB holds its buffers", held>>20)
	}
}

// uploadThroughLink uploads to the link a case planted, as the user the
// files API defaults to: the root-owned file it leads to stays as it was.
func (e *hostileEnv) uploadThroughLink(t *testing.T, _ *hostileEnv, _ string) {
	ctx := context.Background()
	_, err := e.attacker.Files.As("user").Write(ctx, "/home/user/report.txt", strings.NewReader("user wrote this\n"))
	if !deniedErr(err) {
		t.Errorf("upload through a link to a root-owned file: %v, want permission denied", err)
	}
	r := mustRun(t, ctx, e.attacker, "root", "stat -c '%U %a' /etc/cove-protected; cat /etc/cove-protected")
	if r.out != "root 644\nroot-only\n" {
		t.Errorf("the root-owned file behind the link: %q", r.out)
	}
}

// parentsThroughLink uploads as the user to missing directories: below
// /, which the user may not write, they are made for the user, as E2B's
// agent makes them; through the link the case planted (to /etc), or below
// /root, which the user cannot reach, nothing is made.
func (e *hostileEnv) parentsThroughLink(t *testing.T, _ *hostileEnv, _ string) {
	ctx := context.Background()
	files := e.attacker.Files.As("user")
	if _, err := files.Write(ctx, "/0/multi_test_file0.txt", strings.NewReader("made\n")); err != nil {
		t.Errorf("upload as user to /0/multi_test_file0.txt: %v", err)
	}
	if ok, err := files.MakeDir(ctx, "/cove-made/a/b"); err != nil || !ok {
		t.Errorf("make /cove-made/a/b as user: %v %v", ok, err)
	}
	r := mustRun(t, ctx, e.attacker, "root", "stat -c '%U %n' /0 /0/multi_test_file0.txt /cove-made /cove-made/a/b")
	if r.out != "user /0\nuser /0/multi_test_file0.txt\nuser /cove-made\nuser /cove-made/a/b\n" {
		t.Errorf("what the uploads made: %q", r.out)
	}
	for _, p := range []string{"/home/user/into/cove-made/f", "/root/cove-made/f"} {
		if _, err := files.Write(ctx, p, strings.NewReader("no\n")); !deniedErr(err) {
			t.Errorf("upload as user to %s: %v, want permission denied", p, err)
		}
	}
	if ok, err := files.MakeDir(ctx, "/home/user/into/cove-made-dir"); !deniedErr(err) {
		t.Errorf("make a directory as user through the link: %v %v, want permission denied", ok, err)
	}
	r = mustRun(t, ctx, e.attacker, "root", "ls -d /etc/cove-made /etc/cove-made-dir /root/cove-made 2>&1 | grep -v 'No such file'; echo checked")
	if r.out != "checked\n" {
		t.Errorf("made through the link or out of the user's reach: %q", r.out)
	}
}

// listRootAsUser lists and reads /root (mode 0700) through the files API as
// the user: both refused, as they are to the user's commands; root may.
func (e *hostileEnv) listRootAsUser(t *testing.T, _ *hostileEnv, _ string) {
	ctx := context.Background()
	if _, err := e.attacker.Files.As("user").List(ctx, "/root", 1); !deniedErr(err) {
		t.Errorf("list /root as user: %v, want permission denied", err)
	}
	if b, err := e.attacker.Files.As("user").ReadFile(ctx, "/root/secret"); !deniedErr(err) {
		t.Errorf("read /root/secret as user: %q %v, want permission denied", b, err)
	}
	if b, err := e.attacker.Files.As("root").ReadFile(ctx, "/root/secret"); err != nil || string(b) != "root-secret\n" {
		t.Errorf("read /root/secret as root: %q %v", b, err)
	}
}

// deniedErr reports an agent's "permission denied" answer.
func deniedErr(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "permission denied")
}

// othersGetInotify checks, while an attack holds every inotify instance
// its sandbox's root may have, that host root and the neighbour's root can
// still make one, then lets the attack go.
func (e *hostileEnv) othersGetInotify(t *testing.T, _ *hostileEnv, _ string) {
	ctx := context.Background()
	defer mustRun(t, ctx, e.attacker, "root", "touch /tmp/inotify-release")
	if fd, err := unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
		t.Errorf("host root cannot make an inotify instance: %v", err)
	} else {
		unix.Close(fd)
	}
	r := mustRun(t, ctx, e.neighbour, "root", py(`print("neighbour inotify", "ok" if libc.inotify_init1(0) >= 0 else os.strerror(ctypes.get_errno()))`))
	if !strings.Contains(r.out, "neighbour inotify ok") {
		t.Errorf("the neighbour's root cannot make an inotify instance: %s", r.out)
	}
}

// unaffected checks the host and the neighbour after an attack.
func (e *hostileEnv) unaffected(t *testing.T, ctx context.Context) {
	t.Helper()
	if b, err := os.ReadFile(e.secret); err != nil || string(b) != "host secret" {
		t.Errorf("the host's file changed: %q %v", b, err)
	}
	r := mustRun(t, ctx, e.neighbour, "user", "cat /tmp/neighbour-secret; pgrep -c -x sleep; hostname")
	if want := "neighbour-data\n1\n" + e.neighbour.ID + "\n"; r.out != want {
		t.Errorf("the neighbour changed: %q, want %q", r.out, want)
	}
}

func containsPrefix(list []string, s string) bool {
	for _, l := range list {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// TestSecurityDocListsEveryCase keeps docs/SECURITY.md true: every hostile
// case has its row there, and a case that goes otherwise on gVisor a row in
// its table too.
func TestSecurityDocListsEveryCase(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	e := &hostileEnv{secret: "/tmp/x/secret", loopback: &listener{}, anyAddr: &listener{}}
	e.anyAddr6 = &listener{}
	e.loopback.Listener, e.anyAddr.Listener, e.anyAddr6.Listener = fakeAddr{}, fakeAddr{}, fakeAddr{}
	for _, hc := range hostileCases(e) {
		rows := []string{"| " + hc.group + " | " + hc.name + " |"}
		if hc.gvisor != nil { // and its own row in the gVisor table
			rows = append(rows, "| gvisor | "+hc.name+" |")
		}
		for _, row := range rows {
			if !strings.Contains(string(doc), row) {
				t.Errorf("docs/SECURITY.md has no row %q", row)
			}
		}
	}
}

// fakeAddr is a listener that only names an address (the cases' text
// needs a port).
type fakeAddr struct{ net.Listener }

func (fakeAddr) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
