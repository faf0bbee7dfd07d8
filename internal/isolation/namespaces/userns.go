package namespaces

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
)

// A user-namespaced sandbox maps its ids 0..userNSSize-1 to a host range
// of its own (Config.UserNSBase + n·userNSSize): its root and its user are
// host users nobody else is, so the kernel's per-user counts (inotify
// instances, epoll watches, processes …) are the sandbox's own, and no
// file it makes belongs to a host user.
const userNSSize = 65536

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
	if len(fds) > maxPassedMounts {
		return errs.New(errs.InvalidArgument, "%d layers and binds: at most %d", len(fds), maxPassedMounts)
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

// maxPassedMounts bounds the layers and binds one message carries (the
// kernel takes at most 253 descriptors in one).
const maxPassedMounts = 200

// receiveMounts takes the id-mapped mounts the driver passed (in the init,
// before its config), when its config arrives over a socket.
func receiveMounts(fd int) ([]int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, err
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*maxPassedMounts))
	_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("receive mounts: %w", err)
	}
	fds, err := receivedFDs(oob[:oobn])
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("receive mounts: %w", err)
	}
	return fds, nil
}

// raiseEffective makes the calling thread's effective capabilities its
// permitted ones (this thread only: raw system calls).
func raiseEffective() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("read capabilities: %w", e)
	}
	data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("raise capabilities: %w", e)
	}
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	return nil
}

// setEUID sets the calling thread's effective uid (only: a raw system call).
func setEUID(uid uint32) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
		return fmt.Errorf("set effective uid %d: %w", uid, e)
	}
	return nil
}
