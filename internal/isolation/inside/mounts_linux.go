package inside

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation"
)

// MountProc mounts the sandbox's own /proc, with the files that reach the
// host kernel masked (by the sandbox's /dev/null) or read-only, and those
// lxcfs serves (under the host directory lxcfsDir, if any) bound over
// theirs — but for uptime when ownClock: the sandbox's processes have a
// time namespace whose clocks count from the sandbox's create, and the
// kernel's /proc/uptime tells that.
// Its boot id is its own (mountBootID).
func MountProc(root, lxcfsDir string, ownClock bool) error {
	proc := filepath.Join(root, "proc")
	if err := Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	for _, p := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs"} {
		target := filepath.Join(proc, p)
		if _, err := os.Lstat(target); err != nil {
			continue
		}
		if err := BindReadOnly(target, target); err != nil {
			return err
		}
	}
	for _, p := range []string{"kcore", "keys", "timer_list", "sched_debug", "kallsyms", "kpagecount", "kpageflags", "kpagecgroup", "sysrq-trigger", "latency_stats",
		"slabinfo", "vmallocinfo", "config.gz", "modules", "pagetypeinfo", "iomem", "ioports"} {
		target := filepath.Join(proc, p)
		if _, err := os.Lstat(target); err != nil {
			continue
		}
		if err := Mount(filepath.Join(root, "dev/null"), target, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	if err := mountBootID(root); err != nil {
		return err
	}
	if lxcfsDir == "" {
		return nil
	}
	for _, p := range lxcfsFiles {
		if p == "uptime" && ownClock {
			continue
		}
		src, target := filepath.Join(lxcfsDir, "proc", p), filepath.Join(proc, p)
		if _, err := os.Stat(src); err != nil {
			continue // an lxcfs without it (loadavg is optional)
		}
		if err := Mount(src, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind lxcfs's %s: %w", p, err)
		}
		// Read-only and inert where the kernel lets the remount through;
		// lxcfs refuses writes either way.
		_ = Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	return nil
}

// bootIDFile is where a Linux system reads the id of its boot, a UUID.
const bootIDFile = "proc/sys/kernel/random/boot_id"

// mountBootID gives the sandbox a boot id of its own, new at every boot
// (a create, a resume without memory; a resume with its memory keeps it):
// a random UUID in a file of its /dev, bound read-only over the kernel's
// (which is the host's, or a snapshot's), the file then unlinked. This
// process keeps the file open (bootID) for NewBootID.
func mountBootID(root string) error {
	target := filepath.Join(root, bootIDFile)
	if _, err := os.Lstat(target); err != nil {
		return nil // a kernel without it
	}
	src := filepath.Join(root, "dev", ".boot_id")
	f, err := os.OpenFile(src, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	defer os.Remove(src)
	bootID = f
	if err := NewBootID(); err != nil {
		return err
	}
	if err := Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	return Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// bootID is the file mountBootID bound over the kernel's boot id, in the
// process that bound it.
var bootID *os.File

// NewBootID gives the sandbox a new boot id: a guest started from another
// guest's memory (a microVM's boot snapshot) booted anew all the same.
// Without a boot id of its own (another process bound it), it does
// nothing.
func NewBootID() error {
	if bootID == nil {
		return nil
	}
	if _, err := bootID.WriteAt([]byte(uuid.NewString()+"\n"), 0); err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	return nil
}

// devices are the only device nodes a sandbox gets.
var devices = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// MountDev builds a minimal /dev: the nodes above (made with mknod, or
// bound from the host's inside a user namespace, which may not mknod), a
// private devpts with ptmx, a size-capped /dev/shm and the usual symlinks.
func MountDev(root string, shmBytes int64, userNS bool) error {
	dev := filepath.Join(root, "dev")
	if err := Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=65536"); err != nil {
		return err
	}
	old := unix.Umask(0)
	defer unix.Umask(old)
	for _, d := range devices {
		p := filepath.Join(dev, d.name)
		if !userNS {
			if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
				return fmt.Errorf("mknod %s: %w", p, err)
			}
			continue
		}
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return err
		}
		if err := Mount("/dev/"+d.name, p, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return fmt.Errorf("mkdir /dev/%s: %w", d, err)
		}
	}
	if err := Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5,max="+strconv.Itoa(isolation.MaxPTYs)); err != nil {
		return err
	}
	if err := Mount("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,"+isolation.TmpfsLimits(shmBytes)); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("symlink /dev/%s: %w", name, err)
		}
	}
	return nil
}

// Mount mounts, its error naming what and where.
func Mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, dst, err)
	}
	return nil
}

// BindReadOnly binds src at dst (not recursively: the host's submounts stay
// out) and makes the bind read-only, nosuid and nodev. The host's own mount
// is untouched. The source mount's flags are kept: in a user namespace they
// are locked, and dropping one fails.
func BindReadOnly(src, dst string) error {
	if err := Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dst, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV)
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	return Mount("", dst, "", flags, "")
}

// lxcfsFiles are the /proc files a sandbox gets from lxcfs.
var lxcfsFiles = []string{"meminfo", "cpuinfo", "stat", "uptime", "swaps", "diskstats", "loadavg"}
