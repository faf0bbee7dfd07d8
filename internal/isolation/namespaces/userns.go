package namespaces

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/namespaces/nsinit"
)

// userNSSize is how many ids a user-namespaced sandbox maps
// (nsinit.UserNSSize).
const userNSSize = nsinit.UserNSSize

// DefaultUserNSBase is the first host id of user-namespaced sandboxes.
const DefaultUserNSBase = 1 << 30

// idRanges hands out the host id ranges of user-namespaced sandboxes.
type idRanges struct {
	base uint32

	mu   sync.Mutex
	used map[uint32]bool // by first host id
}

func newIDRanges(base uint32) *idRanges { return &idRanges{base: base, used: map[uint32]bool{}} }

// take returns the lowest free range's first host id.
func (r *idRanges) take() (uint32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for first := uint64(r.base); first+userNSSize <= 1<<32; first += userNSSize {
		if !r.used[uint32(first)] {
			r.used[uint32(first)] = true
			return uint32(first), nil
		}
	}
	return 0, errs.New(errs.Unavailable, "no host id range left for a user namespace")
}

// mark records a range an adopted sandbox holds.
func (r *idRanges) mark(first uint32) {
	if first == 0 {
		return
	}
	r.mu.Lock()
	r.used[first] = true
	r.mu.Unlock()
}

// free gives a range back.
func (r *idRanges) free(first uint32) {
	r.mu.Lock()
	delete(r.used, first)
	r.mu.Unlock()
}

// idMappedMounts clones each layer and bind of spec as a detached mount
// whose ids are mapped into the user namespace userns (open_tree and
// mount_setattr), so the sandbox's root owns what host root owns there,
// without a copy. Binds are also nosuid, nodev and (but volumes)
// read-only, flags the namespace cannot take off. The sandbox's init attaches them in its own
// mount namespace; it needs no path into the node's data directory.
func idMappedMounts(spec isolation.Spec, userns int) (fds []int, err error) {
	defer func() {
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			fds = nil
		}
	}()
	clone := func(path string, attrs uint64) error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("clone mount of %s: %w", path, err)
		}
		fds = append(fds, fd)
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | attrs, Userns_fd: uint64(userns)}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			return fmt.Errorf("map the ids of %s into the sandbox's user namespace: %w", path, err)
		}
		return nil
	}
	for _, l := range spec.RootFS.Layers {
		if err := clone(l, 0); err != nil {
			return fds, err
		}
	}
	for _, b := range spec.RootFS.Binds {
		attrs := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if !b.Writable {
			attrs |= unix.MOUNT_ATTR_RDONLY
		}
		if err := clone(b.Source, attrs); err != nil {
			return fds, err
		}
	}
	return fds, nil
}

// configChannel is what the init's config travels through: a pipe, or a
// connected socket pair when descriptors go along (userNS).
func configChannel(userNS bool) (r, w *os.File, err error) {
	if !userNS {
		return os.Pipe()
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("config socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "config"), os.NewFile(uintptr(fds[1]), "config"), nil
}

// sendIDMappedMounts makes the id-mapped mounts of the sandbox whose init
// is pid (its user namespace exists from its start) and passes them over
// the config socket, before the config itself.
func sendIDMappedMounts(sock *os.File, spec isolation.Spec, pid int) error {
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's user namespace: %w", err)
	}
	defer unix.Close(userns)
	fds, err := idMappedMounts(spec, userns)
	if err != nil {
		return err
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if len(fds) > nsinit.MaxPassedMounts {
		return errs.New(errs.InvalidArgument, "%d layers and binds: at most %d", len(fds), nsinit.MaxPassedMounts)
	}
	raw, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		serr = unix.Sendmsg(int(fd), []byte{0}, oob, nil, 0)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("pass mounts to the sandbox: %w", serr)
	}
	return nil
}
