package identity

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// As runs fn with u's rights over files, as a command run by u would
// have them: what u may not read or write is refused, links are followed
// with u's rights, and what fn creates belongs to u without a chown. The
// agent runs as root; fn runs on a thread of its own whose effective ids
// (and with them its file system ids and effective capabilities) are u's,
// while its saved ids stay root's so the thread can return. A thread that
// cannot return is never used again. Root runs fn as it is.
func As(u User, fn func() error) error {
	if u.UID == 0 {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := become(u)
		if err == nil {
			err = fn()
		}
		if restoreRoot() == nil {
			runtime.UnlockOSThread()
		} // else the thread ends with this goroutine
		errc <- err
	}()
	return <-errc
}

// become switches the calling thread (only: raw system calls, not Go's
// all-threads ones) to u's groups and effective ids.
func become(u User) error {
	groups := append([]uint32{u.GID}, u.Groups...)
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
		return fmt.Errorf("act as %s: set groups: %w", u.Name, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), uintptr(u.GID), ^uintptr(0)); e != 0 {
		return fmt.Errorf("act as %s: set gid: %w", u.Name, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(u.UID), ^uintptr(0)); e != 0 {
		return fmt.Errorf("act as %s: set uid: %w", u.Name, e)
	}
	return nil
}

// restoreRoot gives the calling thread root's ids, groups and effective
// capabilities back.
func restoreRoot() error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0)); e != 0 {
		return e
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, ^uintptr(0), 0, ^uintptr(0)); e != 0 {
		return e
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
