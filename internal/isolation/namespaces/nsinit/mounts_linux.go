package nsinit

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
	"github.com/covesandbox/cove/internal/isolation/inside"
)

// buildRoot mounts the sandbox's root file system inside its own mount
// namespace and returns where: a size-capped tmpfs holding the writable
// layer, an overlay of the template's layers under it, read-only binds of
// host directories, and private /proc and /dev. Every mount lives in the
// sandbox's namespace and vanishes with it; nothing propagates to the host.
func buildRoot(cfg Config) (string, error) {
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
		if err := inside.Mount(cfg.Upper, rw, "", unix.MS_BIND, ""); err != nil {
			return "", err
		}
	} else if err := inside.Mount("tmpfs", rw, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,"+isolation.TmpfsLimits(cfg.DiskBytes)); err != nil {
		return "", err
	}
	if err := keepAt(rw, inside.FDLayer); err != nil {
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
	if err := inside.Mount("overlay", root, "overlay", unix.MS_NODEV, opts); err != nil {
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
		if b.Target == inside.AgentPath {
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
		if err := inside.BindReadOnly(b.Source, target); err != nil {
			return "", err
		}
	}
	if err := inside.MountDev(root, cfg.ShmBytes, cfg.UserNS); err != nil {
		return "", err
	}
	if err := inside.MountProc(root, cfg.LXCFS, cfg.ownClock); err != nil {
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
	dir, file := strings.TrimPrefix(filepath.Dir(inside.AgentPath), "/"), strings.TrimPrefix(inside.AgentPath, "/")
	if err := r.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mkdir %s: %w", inside.AgentPath, err)
	}
	if st, err := r.Lstat(dir); err != nil || !st.IsDir() {
		return errs.New(errs.InvalidArgument, "the template's /%s is not a directory: Cove binds its sandbox binary at %s", dir, inside.AgentPath)
	}
	st, err := r.Lstat(file)
	switch {
	case err == nil && st.Mode().IsRegular():
		return nil
	case err == nil:
		return errs.New(errs.InvalidArgument, "the template's %s is not a regular file: Cove binds its sandbox binary there", inside.AgentPath)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	f, err := r.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o555)
	if err != nil {
		return fmt.Errorf("create %s: %w", inside.AgentPath, err)
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
