package namespaces

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/lxcfs"
)

// buildRoot mounts the sandbox's root file system inside its own mount
// namespace and returns where: a size-capped tmpfs holding the writable
// layer, an overlay of the template's layers under it, read-only binds of
// host directories, and private /proc and /dev. Every mount lives in the
// sandbox's namespace and vanishes with it; nothing propagates to the host.
func buildRoot(cfg initConfig) (string, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make mounts private: %w", err)
	}
	rw := filepath.Join(cfg.Dir, "rw")
	if cfg.UserNS {
		// The node's data directory is closed to the namespace's root
		// (another host user): the writable layer goes over the host's
		// /tmp instead, in this mount namespace only.
		rw = userNSScratch
	}
	if cfg.Upper != "" {
		if err := mount(cfg.Upper, rw, "", unix.MS_BIND, ""); err != nil {
			return "", err
		}
	} else if err := mount("tmpfs", rw, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,"+isolation.TmpfsLimits(cfg.DiskBytes)); err != nil {
		return "", err
	}
	if err := keepAt(rw, fdLayer); err != nil {
		return "", err
	}
	upper, work, root := filepath.Join(rw, "upper"), filepath.Join(rw, "work"), filepath.Join(rw, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	layers := cfg.Layers
	if cfg.UserNS {
		var err error
		if layers, err = attachLayers(rw, cfg.layerFDs); err != nil {
			return "", err
		}
	}
	lower := make([]string, len(layers))
	for i, l := range layers { // overlayfs lists the topmost lower first
		lower[len(layers)-1-i] = l
	}
	// The upper must stand alone (it becomes a template layer, a snapshot,
	// a fork's): no references into the lower layers it was made over.
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", strings.Join(lower, ":"), upper, work, isolation.SelfContainedUpper)
	if cfg.UserNS {
		// In a user namespace overlayfs cannot read trusted.* attributes:
		// layers' shifted copies carry opaque markers as user.* too.
		opts += ",userxattr"
	}
	// nodev: a device node in a template layer (an image may carry any)
	// opens nothing; the sandbox's /dev is a mount of its own.
	if err := mount("overlay", root, "overlay", unix.MS_NODEV, opts); err != nil {
		return "", err
	}
	// Mount points an image may lack (they land in the writable layer).
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{"dev", 0o755}, {"proc", 0o555}, {"tmp", 0o1777}} {
		p := filepath.Join(root, d.path)
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			if err := os.Mkdir(p, d.mode); err != nil {
				return "", fmt.Errorf("mkdir %s: %w", p, err)
			}
			if err := os.Chmod(p, d.mode); err != nil {
				return "", err
			}
		}
	}
	for i, b := range cfg.Binds {
		if b.Writable {
			var fd int
			if cfg.UserNS {
				fd = cfg.bindFDs[i]
			}
			if err := bindVolume(root, b, fd); err != nil {
				return "", err
			}
			continue
		}
		target := filepath.Join(root, b.Target)
		if b.Target == AgentPath {
			if err := agentMountPoint(root); err != nil {
				return "", err
			}
		}
		if cfg.UserNS { // id-mapped, read-only, nosuid and nodev already
			if err := attach(cfg.bindFDs[i], target); err != nil {
				return "", err
			}
			continue
		}
		if err := bindReadOnly(b.Source, target); err != nil {
			return "", err
		}
	}
	if err := mountDev(root, cfg.ShmBytes, cfg.UserNS); err != nil {
		return "", err
	}
	if err := mountProc(root, cfg.LXCFS); err != nil {
		return "", err
	}
	if err := isolation.WriteIdentity(root, cfg.ID, cfg.DNS); err != nil {
		return "", err
	}
	return root, nil
}

// keepAt opens dir (O_PATH) at descriptor fd, which the agent inherits.
func keepAt(dir string, fd int) error {
	f, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(f)
	if err := unix.Dup3(f, fd, 0); err != nil {
		return fmt.Errorf("keep %s open: %w", dir, err)
	}
	return nil
}

// agentMountPoint makes the file the sandbox binary is bound on, in the
// sandbox's writable layer. The image's own /.cove is the template
// author's: it is looked at inside the root (os.Root) and must be a
// directory holding at most a regular file of that name, else the sandbox
// is refused (a link there would lead the bind, and the file made for it,
// into the host's tree).
func agentMountPoint(root string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	dir, file := strings.TrimPrefix(filepath.Dir(AgentPath), "/"), strings.TrimPrefix(AgentPath, "/")
	if err := r.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mkdir %s: %w", AgentPath, err)
	}
	if st, err := r.Lstat(dir); err != nil || !st.IsDir() {
		return errs.New(errs.InvalidArgument, "the template's /%s is not a directory: Cove binds its sandbox binary at %s", dir, AgentPath)
	}
	st, err := r.Lstat(file)
	switch {
	case err == nil && st.Mode().IsRegular():
		return nil
	case err == nil:
		return errs.New(errs.InvalidArgument, "the template's %s is not a regular file: Cove binds its sandbox binary there", AgentPath)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	f, err := r.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o555)
	if err != nil {
		return fmt.Errorf("create %s: %w", AgentPath, err)
	}
	return f.Close()
}

// userNSScratch is where a user-namespaced sandbox's writable layer and
// its layers' mounts go, in its own mount namespace.
const userNSScratch = "/tmp"

// attachLayers attaches the id-mapped mounts of the layers under
// rw/layers and returns their paths.
func attachLayers(rw string, fds []int) ([]string, error) {
	paths := make([]string, len(fds))
	for i, fd := range fds {
		p := filepath.Join(rw, "layers", strconv.Itoa(i))
		if err := os.MkdirAll(p, 0o700); err != nil {
			return nil, err
		}
		if err := attach(fd, p); err != nil {
			return nil, err
		}
		paths[i] = p
	}
	return paths, nil
}

// attach puts a detached mount (a descriptor from open_tree) at dst.
func attach(fd int, dst string) error {
	defer unix.Close(fd)
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach a mount at %s: %w", dst, err)
	}
	return nil
}

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, dst, err)
	}
	return nil
}

// bindReadOnly binds src at dst (not recursively: the host's submounts stay
// out) and makes the bind read-only, nosuid and nodev. The host's own mount
// is untouched. The source mount's flags are kept: in a user namespace they
// are locked, and dropping one fails.
func bindReadOnly(src, dst string) error {
	if err := mount(src, dst, "", unix.MS_BIND, ""); err != nil {
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
	return mount("", dst, "", flags, "")
}

// bindVolume binds a volume read-write (nosuid, nodev) at its target,
// made inside the root if missing (an os.Root: a link in the template
// leads nowhere outside it); the bind goes onto the directory opened
// there, never a path looked up again. In a user namespace fd is its
// id-mapped clone (passed by the node), else the init clones its host path.
func bindVolume(root string, b isolation.Bind, fd int) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	rel := strings.TrimPrefix(filepath.Clean(b.Target), "/")
	if err := r.MkdirAll(rel, 0o755); err != nil {
		return errs.New(errs.InvalidArgument, "volume mount point %s: %v", b.Target, err)
	}
	dir, err := r.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return errs.New(errs.InvalidArgument, "volume mount point %s: %v", b.Target, err)
	}
	defer dir.Close()
	if fd <= 0 {
		if fd, err = unix.OpenTree(unix.AT_FDCWD, b.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err != nil {
			return fmt.Errorf("clone mount of %s: %w", b.Source, err)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("volume %s: %w", b.Source, err)
		}
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(fd, "", int(dir.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the volume at %s: %w", b.Target, err)
	}
	return nil
}

// mountProc mounts the sandbox's own /proc, with the files that reach the
// host kernel masked (by the sandbox's /dev/null) or read-only, and those
// lxcfs serves (under the host directory lxcfsDir, if any) bound over
// theirs.
func mountProc(root, lxcfsDir string) error {
	proc := filepath.Join(root, "proc")
	if err := mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	for _, p := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs"} {
		target := filepath.Join(proc, p)
		if _, err := os.Lstat(target); err != nil {
			continue
		}
		if err := bindReadOnly(target, target); err != nil {
			return err
		}
	}
	for _, p := range []string{"kcore", "keys", "timer_list", "sched_debug", "kallsyms", "kpagecount", "kpageflags", "kpagecgroup", "sysrq-trigger", "latency_stats",
		"slabinfo", "vmallocinfo", "config.gz", "modules", "pagetypeinfo", "iomem", "ioports"} {
		target := filepath.Join(proc, p)
		if _, err := os.Lstat(target); err != nil {
			continue
		}
		if err := mount(filepath.Join(root, "dev/null"), target, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	if lxcfsDir == "" {
		return nil
	}
	for _, p := range lxcfs.Files {
		src, target := filepath.Join(lxcfsDir, "proc", p), filepath.Join(proc, p)
		if _, err := os.Stat(src); err != nil {
			continue // an lxcfs without it (loadavg is optional)
		}
		if err := mount(src, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind lxcfs's %s: %w", p, err)
		}
		// Read-only and inert where the kernel lets the remount through;
		// lxcfs refuses writes either way.
		_ = mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
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

// mountDev builds a minimal /dev: the nodes above (made with mknod, or
// bound from the host's inside a user namespace, which may not mknod), a
// private devpts with ptmx, a size-capped /dev/shm and the usual symlinks.
func mountDev(root string, shmBytes int64, userNS bool) error {
	dev := filepath.Join(root, "dev")
	if err := mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=65536"); err != nil {
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
		if err := mount("/dev/"+d.name, p, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return fmt.Errorf("mkdir /dev/%s: %w", d, err)
		}
	}
	if err := mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5,max="+strconv.Itoa(isolation.MaxPTYs)); err != nil {
		return err
	}
	if err := mount("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,"+isolation.TmpfsLimits(shmBytes)); err != nil {
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
