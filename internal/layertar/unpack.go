// Package layertar packs a layer — a directory of files, overlayfs
// whiteouts and opaque directories — as a tar stream, and unpacks such
// streams (a layer's, an OCI image layer's, a build context's) without
// letting any entry reach outside the directory it unpacks into.
package layertar

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/fsutil"
)

// Whiteout markers of OCI image layers.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// UnpackOptions tune Unpack.
type UnpackOptions struct {
	// Overlay turns OCI whiteouts into overlayfs ones (a 0/0 character
	// device, the trusted.overlay.opaque attribute), as an image layer
	// needs; without it they are refused.
	Overlay bool
	// Exact keeps the owner and mode the archive gives its whiteouts: a
	// layer a node pushed comes back the same, to its digest.
	Exact bool
	// Budget, when set, is charged every byte written and entryCost for
	// each entry; the unpack stops at the first charge it refuses.
	Budget *fsutil.Budget
}

// entryCost is what an entry costs a Budget beside its bytes: an inode and
// a block, so that a flood of empty files is bounded too.
const entryCost = 4096

// Unpack unpacks a tar stream (gzip-compressed or not) into dir, which must
// exist. Every path stays inside dir: names are cleaned of "..", and all
// file system work goes through an os.Root, so a symlink in the archive
// cannot lead a later entry outside. Devices, fifos and sockets are left
// out (a sandbox's /dev is its own); owners and modes are kept.
func Unpack(r io.Reader, dir string, opts UnpackOptions) error {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		name := cleanName(hdr.Name)
		if err := opts.Budget.Charge(entryCost); err != nil {
			return err
		}
		if err := unpackEntry(root, tr, hdr, name, opts); err != nil {
			return fmt.Errorf("unpack %s: %w", hdr.Name, err)
		}
	}
}

// cleanName turns an archive path into one relative to the root ("." for
// the root itself); ".." cannot climb above the root.
func cleanName(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

func unpackEntry(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string, opts UnpackOptions) error {
	if name == "" {
		if hdr.Typeflag != tar.TypeDir {
			return nil
		}
		if opts.Exact {
			if err := setMarkers(root, ".", hdr); err != nil {
				return err
			}
		}
		return setAttrs(root, ".", hdr)
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	if strings.HasPrefix(base, whiteoutPrefix) {
		if !opts.Overlay {
			return fmt.Errorf("whiteouts are not allowed here")
		}
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if base == whiteoutOpaque {
			return setOpaque(root, dir)
		}
		hidden := strings.TrimPrefix(base, whiteoutPrefix)
		if err := whiteout(root, dir, hidden); err != nil || !opts.Exact {
			return err
		}
		if err := root.Lchown(path.Join(dir, hidden), hdr.Uid, hdr.Gid); err != nil {
			return err
		}
		return root.Chmod(path.Join(dir, hidden), fs.FileMode(hdr.Mode)&fs.ModePerm)
	}
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if st, err := root.Lstat(name); err == nil && st.IsDir() {
			return setAttrs(root, name, hdr)
		}
		if err := replace(root, name); err != nil {
			return err
		}
		if err := root.Mkdir(name, 0o700); err != nil {
			return err
		}
		if opts.Exact {
			if err := setMarkers(root, name, hdr); err != nil {
				return err
			}
		}
	case tar.TypeReg: // tar.Reader reads the old TypeRegA as this
		if err := replace(root, name); err != nil {
			return err
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(opts.Budget.Writer(f), tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := replace(root, name); err != nil {
			return err
		}
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		if err := replace(root, name); err != nil {
			return err
		}
		if err := root.Link(cleanName(hdr.Linkname), name); err != nil {
			return err
		}
		return nil // the link shares its target's attributes
	default: // devices, fifos, extended headers already folded in
		return nil
	}
	return setAttrs(root, name, hdr)
}

// replace removes a non-directory entry at name so a new one can take it.
func replace(root *os.Root, name string) error {
	st, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		return root.RemoveAll(name) // a later layer entry replaces a directory whole
	}
	return root.Remove(name)
}

func setAttrs(root *os.Root, name string, hdr *tar.Header) error {
	if err := root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeSymlink {
		return nil
	}
	mode := fs.FileMode(hdr.Mode) & fs.ModePerm
	if hdr.Mode&04000 != 0 {
		mode |= fs.ModeSetuid
	}
	if hdr.Mode&02000 != 0 {
		mode |= fs.ModeSetgid
	}
	if hdr.Mode&01000 != 0 {
		mode |= fs.ModeSticky
	}
	if err := root.Chmod(name, mode); err != nil {
		return err
	}
	return root.Chtimes(name, hdr.ModTime, hdr.ModTime)
}

// setMarkers gives a directory the opaque markers its entry records
// (Exact: a Cove layer's, which keeps them as they were; no other
// attribute is taken).
func setMarkers(root *os.Root, name string, hdr *tar.Header) error {
	d, err := root.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	for _, x := range opaqueXattrs {
		if hdr.PAXRecords[paxXattr+x] == "y" {
			if err := unix.Fsetxattr(int(d.Fd()), x, []byte("y"), 0); err != nil {
				return fmt.Errorf("mark %s opaque: %w", name, err)
			}
		}
	}
	return nil
}

// whiteout hides name of lower layers: overlayfs reads a 0/0 character
// device as "deleted".
func whiteout(root *os.Root, dir, name string) error {
	if err := replace(root, path.Join(dir, name)); err != nil {
		return err
	}
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := mknodWhiteout(d, name); err != nil {
		return fmt.Errorf("mknod whiteout: %w", err)
	}
	return nil
}

// setOpaque hides the lower layers' contents of dir, in both forms: the
// trusted.* one for overlays the host mounts, the user.* one for those a
// user namespace mounts (userxattr).
func setOpaque(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for _, x := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		if err := unix.Fsetxattr(int(d.Fd()), x, []byte("y"), 0); err != nil {
			return fmt.Errorf("mark %s opaque: %w", dir, err)
		}
	}
	return nil
}
