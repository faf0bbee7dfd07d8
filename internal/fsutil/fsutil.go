// Package fsutil holds file system helpers that must be safe as root on a
// host whose directories may hold mounts.
package fsutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// RemoveTree deletes a directory tree without ever crossing into another
// file system: it refuses if anything is mounted at or below dir, and
// removes only entries on dir's own device.
func RemoveTree(dir string) error {
	if mounted, err := HasMountUnder(dir); err != nil {
		return err
	} else if mounted {
		return fmt.Errorf("refusing to remove %s: something is mounted under it", dir)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	return removeSameDevice(dir, uint64(st.Dev)) // Dev is an int32 on some systems
}

func removeSameDevice(dir string, dev uint64) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if uint64(st.Dev) != dev {
			return fmt.Errorf("refusing to remove %s: on another file system", p)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := removeSameDevice(p, dev); err != nil {
				return err
			}
			continue
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// HasMountUnder reports whether the host's mount table has a mount at or
// below dir.
func HasMountUnder(dir string) (bool, error) {
	mps, err := MountsUnder(dir)
	return len(mps) > 0, err
}

// MountsUnder returns the mount points at or below dir, in the mount
// table's order (a mount before those on top of it).
func MountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Owner returns a file's uid<<32|gid, for hashing and comparisons.
func Owner(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*unix.Stat_t); ok {
		return uint64(st.Uid)<<32 | uint64(st.Gid)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Uid)<<32 | uint64(st.Gid)
	}
	return 0
}

// CopyOptions tune CopyTree.
type CopyOptions struct {
	// Shift is added to every uid and gid (an id-mapped copy for a user
	// namespace); 0 keeps owners.
	Shift uint32
	// Skip, when set, leaves out paths (relative to the source root).
	Skip func(rel string) bool
	// Owner, when set, gives every copy this owner instead of the source's.
	Owner *Ids
	// Mode, when not zero, replaces the permission bits of every copy
	// that is not a symlink.
	Mode os.FileMode
	// Overlay keeps what makes an overlayfs layer: whiteouts (0/0
	// character devices) and opaque directories.
	Overlay bool
	// UserXattrs says the source is the upper of an overlay mounted in a
	// user namespace (userxattr): its own opaque markers are
	// user.overlay.opaque, not trusted.overlay.opaque.
	UserXattrs bool
}

// Ids are a uid and a gid.
type Ids struct{ UID, GID int }

// CopyTree copies a file, symlink or directory tree to dst (which must not
// exist), keeping modes and, shifted by opts.Shift, owners. Devices,
// sockets and fifos are left out.
func CopyTree(src, dst string, opts CopyOptions) error {
	return copyTree(src, dst, ".", opts)
}

func copyTree(src, dst, rel string, opts CopyOptions) error {
	if opts.Skip != nil && opts.Skip(rel) {
		return nil
	}
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	case st.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), filepath.Join(rel, e.Name()), opts); err != nil {
				return err
			}
		}
	case st.Mode().IsRegular():
		if err := copyFile(src, dst); err != nil {
			return err
		}
	case opts.Overlay && isWhiteout(st):
		if err := unix.Mknod(dst, unix.S_IFCHR, 0); err != nil {
			return fmt.Errorf("copy whiteout %s: %w", rel, err)
		}
	default:
		return nil
	}
	if opts.Overlay && st.IsDir() {
		if err := copyOpaque(src, dst, opts.UserXattrs); err != nil {
			return err
		}
	}
	owner := Owner(st)
	uid, gid := int(uint32(owner>>32)+opts.Shift), int(uint32(owner)+opts.Shift)
	if opts.Owner != nil {
		uid, gid = opts.Owner.UID, opts.Owner.GID
	}
	if err := os.Lchown(dst, uid, gid); err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink == 0 {
		mode := st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
		if opts.Mode != 0 {
			mode = opts.Mode
		}
		if err := os.Chmod(dst, mode); err != nil {
			return err
		}
	}
	// Times last (a directory's after its entries): programs compare them
	// (Python's bytecode caches, make).
	t := unix.NsecToTimespec(st.ModTime().UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
}

func copyFile(src, dst string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// isWhiteout reports an overlayfs whiteout: a 0/0 character device.
func isWhiteout(st os.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && st.Mode()&os.ModeCharDevice != 0 && s.Rdev == 0
}

// opaqueXattrs mark a directory that hides the lower layers' (trusted.*
// as the host mounts layers, user.* as a user namespace does).
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

// copyOpaque carries an opaque directory's marker over, in both forms.
// Only the source overlay's own form marks it: trusted.overlay.opaque for
// overlays in the host's namespace (build steps, gVisor sandboxes), where
// a user.overlay.opaque on a source directory is a lower layer's marker,
// copied up with the directory when the step changed it (taken as this
// layer's, it would hide what the lower layers hold there);
// user.overlay.opaque for a user namespace's (userxattr).
func copyOpaque(src, dst string, userXattrs bool) error {
	marker := opaqueXattrs[0]
	if userXattrs {
		marker = opaqueXattrs[1]
	}
	buf := make([]byte, 1)
	if n, err := unix.Lgetxattr(src, marker, buf); err != nil || n != 1 || buf[0] != 'y' {
		return nil
	}
	for _, y := range opaqueXattrs {
		if err := unix.Lsetxattr(dst, y, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark %s opaque: %w", dst, err)
		}
	}
	return nil
}

// WriteJSON writes v as JSON to path atomically (a temporary file renamed
// over it), readable by its owner only: a crash leaves the old file or the
// new one, never half of one.
func WriteJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
