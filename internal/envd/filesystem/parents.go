package filesystem

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/envd/identity"
)

// MakeParents creates the directories of the absolute path dir that are
// missing, with the agent's rights, each owned by u: E2B's agent does so,
// and its users upload to /0/file as the default user. It creates them
// only below a directory u can reach (the deepest one that exists, found
// with u's rights), along a path without a symbolic link (resolved with
// RESOLVE_NO_SYMLINKS, each new directory opened below the last), so a
// link u planted cannot lead it elsewhere. Anywhere else it creates
// nothing, and the caller goes on with u's rights alone. It never writes
// a file: the file is the caller's, with u's rights.
//
// Calls are one at a time: a directory is made by root and then given to
// u, and a concurrent call must not find it in between (it would take it
// as u's and fail to write in it).
func MakeParents(dir string, u identity.User) error {
	if u.UID == 0 || !filepath.IsAbs(dir) {
		return nil
	}
	makingParents.Lock()
	defer makingParents.Unlock()
	if _, err := os.Lstat(dir); err == nil {
		return nil // the common case: nothing to make, no need to act as u
	}
	dir = filepath.Clean(dir)
	var have string
	var missing []string
	_ = identity.As(u, func() error {
		for p := dir; ; p = filepath.Dir(p) {
			st, err := os.Lstat(p)
			switch {
			case err == nil && st.IsDir():
				have = p
				return nil
			case err == nil, !errors.Is(err, fs.ErrNotExist), p == "/":
				return nil // a file or a link, or out of u's reach
			}
			missing = append([]string{filepath.Base(p)}, missing...)
		}
	})
	if have == "" || len(missing) == 0 {
		return nil
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, have, how)
	if err != nil {
		return nil // a link on the way: u's rights decide
	}
	defer func() { unix.Close(fd) }()
	p := have
	for _, name := range missing {
		p = filepath.Join(p, name)
		made := true
		if err := unix.Mkdirat(fd, name, 0o755); errors.Is(err, unix.EEXIST) {
			made = false // made meanwhile: as it is
		} else if err != nil {
			return PathError(p, err)
		}
		how.Resolve |= unix.RESOLVE_BENEATH
		next, err := unix.Openat2(fd, name, how)
		if err != nil {
			return PathError(p, err)
		}
		unix.Close(fd)
		fd = next
		if made {
			if err := unix.Fchownat(fd, "", int(u.UID), int(u.GID), unix.AT_EMPTY_PATH); err != nil {
				return PathError(p, err)
			}
		}
	}
	return nil
}

// makingParents makes MakeParents' calls one at a time.
var makingParents sync.Mutex
