package template

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs at dir, nosuid, nodev unless devices, with
// the options opts.
func mountTmpfs(dir string, devices bool, opts string) error {
	flags := uintptr(unix.MS_NOSUID)
	if !devices {
		flags |= unix.MS_NODEV
	}
	return unix.Mount("tmpfs", dir, "tmpfs", flags, opts)
}

// unmount detaches what is mounted at dir; nothing there is no error.
func unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

// ownMounts starts a child in a mount namespace and a process group of its
// own.
func ownMounts() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true}
}
