package fsutil

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked is TryLock's error when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// TryLock takes an exclusive flock on path (created 0600) without waiting
// and writes desc into it, for the process that finds it taken: that one
// gets ErrLocked and the holder's desc. The lock goes with release or the
// process.
func TryLock(path, desc string) (release func(), holder string, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, strings.TrimSpace(string(b)), ErrLocked
		}
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(desc+"\n"), 0)
	}
	return func() { f.Close() }, "", nil
}
