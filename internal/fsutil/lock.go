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
// gets ErrLocked and the holder's desc. release removes the file and drops
// the lock; a lock whose process died without release stays on disk
// unheld, and the next TryLock takes it over.
//
// The file is removed while locked, so a process may lock a file that is
// no longer at path: TryLock checks that the file it locked is the one at
// path, and tries again when it is not.
func TryLock(path, desc string) (release func(), holder string, err error) {
	for range 10 {
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
		if !samePath(f, path) { // its holder removed it meanwhile
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(desc+"\n"), 0)
		}
		return func() {
			os.Remove(path) // still locked: no other process holds it now
			f.Close()
		}, "", nil
	}
	return nil, "", fmt.Errorf("lock %s: removed and made again under it too often", path)
}

// samePath reports whether f is the file at path.
func samePath(f *os.File, path string) bool {
	var held, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(path, &named) != nil {
		return false
	}
	return held.Dev == named.Dev && held.Ino == named.Ino
}
