package layertar

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// PackOptions tune Pack.
type PackOptions struct {
	// Opaque, when set, is the one attribute that marks a directory
	// opaque in dir (the form of the overlay that wrote it: another is a
	// lower layer's marker, copied up with the directory); the archive
	// then records such a directory in both forms. Unset, each form is
	// recorded as it is.
	Opaque string
	// SkipSpecial leaves sockets, fifos and devices (but whiteouts) out,
	// as Unpack does; unset, they fail the pack.
	SkipSpecial bool
}

// Pack writes the layer in dir as a tar stream that Unpack (with Overlay
// and Exact) turns back into the same tree: every entry with its owner,
// mode and time, whiteouts and opaque directories in the OCI form, hard
// links once.
func Pack(w io.Writer, dir string, opts PackOptions) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // device and inode → first name
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys, _ := st.Sys().(*syscall.Stat_t)
		if sys == nil {
			return fmt.Errorf("%s: no owner", rel)
		}
		hdr := &tar.Header{Name: rel, Mode: int64(unixMode(st)), Uid: int(sys.Uid), Gid: int(sys.Gid),
			ModTime: st.ModTime(), Format: tar.FormatPAX}
		switch {
		case st.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
			for _, x := range opaqueXattrs {
				marked := IsMarked(p, x)
				if opts.Opaque != "" {
					marked = IsMarked(p, opts.Opaque)
				}
				if marked {
					if hdr.PAXRecords == nil {
						hdr.PAXRecords = map[string]string{}
					}
					hdr.PAXRecords[paxXattr+x] = "y"
				}
			}
		case st.Mode()&fs.ModeSymlink != 0:
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			hdr.Typeflag = tar.TypeSymlink
		case IsWhiteout(st):
			hdr.Typeflag, hdr.Name = tar.TypeReg, path.Join(path.Dir(rel), whiteoutPrefix+path.Base(rel))
		case st.Mode().IsRegular():
			id := [2]uint64{uint64(sys.Dev), sys.Ino} // Dev is an int32 on some systems
			if first, ok := links[id]; ok && sys.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			} else {
				links[id] = rel
				hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
			}
		case opts.SkipSpecial:
			return nil
		default:
			return fmt.Errorf("%s: a %s cannot be packed", rel, st.Mode().Type())
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, hdr.Size)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// unixMode is a file's permission and set-id bits as tar keeps them.
func unixMode(st fs.FileInfo) uint32 {
	m := uint32(st.Mode().Perm())
	for _, b := range []struct {
		mode fs.FileMode
		bit  uint32
	}{{fs.ModeSetuid, 0o4000}, {fs.ModeSetgid, 0o2000}, {fs.ModeSticky, 0o1000}} {
		if st.Mode()&b.mode != 0 {
			m |= b.bit
		}
	}
	return m
}

// IsWhiteout reports an overlayfs whiteout: a 0/0 character device.
func IsWhiteout(st fs.FileInfo) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && st.Mode()&fs.ModeCharDevice != 0 && st.Mode()&fs.ModeDevice != 0 && s.Rdev == 0
}

// opaqueXattrs are the attributes that mark an overlay directory opaque:
// the host's form and a user namespace's (userxattr).
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

// paxXattr prefixes an extended attribute's PAX record.
const paxXattr = "SCHILY.xattr."

// IsMarked reports whether p carries the opaque marker x.
func IsMarked(p, x string) bool {
	buf := make([]byte, 1)
	n, err := unix.Lgetxattr(p, x, buf)
	return err == nil && n == 1 && buf[0] == 'y'
}
