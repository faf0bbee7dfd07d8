package nsinit

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxPassedMounts bounds the layers and binds one message carries (the
// kernel takes at most 253 descriptors in one).
const MaxPassedMounts = 200

// receiveMounts takes the id-mapped mounts the driver passed (in the init,
// before its config), when its config arrives over a socket.
func receiveMounts(fd int) ([]int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, err
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*MaxPassedMounts))
	_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("receive mounts: %w", err)
	}
	fds, err := ReceivedFDs(oob[:oobn])
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

// ReceivedFDs are the descriptors an SCM_RIGHTS message brought.
func ReceivedFDs(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("descriptors received: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return fds, fmt.Errorf("descriptors received: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}
