package microvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
)

// A guest's QEMU opens its devices, sockets and files as root, then drops
// to a host uid and gid of its own (no capabilities, no way back: QEMU's
// seccomp filter sets no_new_privs and denies spawning) and chroots into
// an empty directory. A QEMU its guest took over can then touch no file of
// the host and signal no process of another sandbox.
const (
	// vmmUserBase..+vmmUsers are the VMMs' uids: below the namespaces
	// driver's user namespace ranges (1<<30 and up), above any real
	// user's.
	vmmUserBase = 1<<30 - vmmUsers
	vmmUsers    = 1 << 20
	// VMMUserDir holds a lock file per uid in use, host-wide: every
	// server of a host takes its VMMs' uids there.
	VMMUserDir = "/run/cove/vmm-users"
)

// takeVMMUser takes the first uid no other QEMU holds: it locks the uid's
// file in dir (flock) and returns the open lock, which the QEMU given that
// uid inherits. The uid is taken as long as a process holds the lock open
// — the QEMU, past a restart of the node — and free when it exits.
func takeVMMUser(dir string) (uint32, *os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, nil, err
	}
	for n := range uint32(vmmUsers) {
		uid := vmmUserBase + n
		f, err := os.OpenFile(filepath.Join(dir, strconv.FormatUint(uint64(uid), 10)), os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return 0, nil, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return uid, f, nil
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return 0, nil, fmt.Errorf("lock a VMM uid: %w", err)
		}
	}
	return 0, nil, errs.New(errs.Unavailable, "all %d VMM uids are in use", vmmUsers)
}
