// Package lxcfs gives sandboxes a /proc that tells their own limits: the
// lxcfs FUSE file system (Debian's lxcfs) answers reads of meminfo,
// cpuinfo, stat, uptime, … with the reading process's cgroup limits and
// use, and the namespaces driver binds those files over the sandbox's
// /proc. Without it a sandbox sees the host's memory, and runtimes size
// their heaps and pools by it.
//
// lxcfs is a host service: Cove uses the one mounted at the directory
// (Debian's lxcfs.service mounts /var/lib/lxcfs), or starts one there and
// leaves it running — sandboxes outlive a server restart, and their binds
// would break with it. The instance Cove starts runs in a cgroup of its
// own with a CPU, memory and pids cap: reads from sandboxes cost its CPU,
// not theirs, so the cap keeps a sandbox reading in a loop from taking
// the host's.
package lxcfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
)

// DefaultDir is where Debian's lxcfs service mounts it.
const DefaultDir = "/var/lib/lxcfs"

const (
	fuseMagic = 0x65735546
	lockFile  = "/run/cove/lxcfs.lock"
	pidFile   = "/run/cove/lxcfs.pid"
	// Group is the cgroup of the lxcfs Cove starts, and its limits.
	Group = "cove-lxcfs"
)

var groupLimits = cgroups.Limits{CPUMillis: 500, MemoryBytes: 256 << 20, PIDs: 256}

// Mounted reports whether dir holds a mounted lxcfs.
func Mounted(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != fuseMagic {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "proc", "meminfo"))
	return err == nil
}

// Ensure returns dir with lxcfs mounted on it: the one there, or one it
// starts from the lxcfs program on PATH (with CPU virtualization by the
// cgroup's quota). An error says why sandboxes will see the host's /proc.
func Ensure(ctx context.Context, dir string, log *slog.Logger) (string, error) {
	if Mounted(dir) {
		return dir, nil
	}
	bin, err := exec.LookPath("lxcfs")
	if err != nil {
		return "", errors.New("lxcfs is not installed (apt-get install lxcfs)")
	}
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(lockFile, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	if Mounted(dir) { // another node started it meanwhile
		return dir, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); errors.Is(err, unix.ENOTCONN) {
		// An lxcfs that died left its mount: nothing can be read there.
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return "", fmt.Errorf("unmount the dead lxcfs at %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// lxcfs runs in its own session, goes on when the server stops, and is
	// waited for (reaped) while the server runs.
	// Its output goes to a file, not a pipe: the daemon keeps what it
	// inherits open.
	logPath := filepath.Join(filepath.Dir(pidFile), "lxcfs.log")
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", err
	}
	defer out.Close()
	cmd := exec.Command(bin, "--enable-cfs", "--pidfile", pidFile, dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start lxcfs: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); !Mounted(dir); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			return "", fmt.Errorf("lxcfs exited (%v): %s", err, strings.TrimSpace(string(b)))
		case <-ctx.Done():
			return "", ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("lxcfs did not mount %s within 10 s", dir)
		}
	}
	if err := confine(); err != nil {
		log.Warn("lxcfs runs without its own cgroup", "err", err)
	}
	log.Info("started lxcfs; it stays running for the sandboxes that use it", "dir", dir)
	return dir, nil
}

// confine moves the lxcfs Cove started into its capped cgroup.
func confine() error {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s: %w", pidFile, err)
	}
	g, err := cgroups.Load(Group)
	if err != nil {
		if g, err = cgroups.New(Group, groupLimits); err != nil {
			return err
		}
	}
	return g.Add(pid)
}
