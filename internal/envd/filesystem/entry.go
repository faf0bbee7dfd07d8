package filesystem

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// MetadataXattrPrefix prefixes the extended attributes that hold a file's
// user metadata (X-Metadata-* headers of an upload), E2B's own: metadata
// set inside the sandbox with setfattr -n user.e2b.<key> shows too.
const MetadataXattrPrefix = "user.e2b."

// Entry describes path without following a final symlink.
func Entry(path string) (*pb.EntryInfo, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, PathError(path, err)
	}
	return entryFromInfo(path, st), nil
}

func entryFromInfo(path string, st fs.FileInfo) *pb.EntryInfo {
	e := &pb.EntryInfo{
		Name:         filepath.Base(path),
		Path:         path,
		Size:         st.Size(),
		Mode:         uint32(st.Mode().Perm()),
		Permissions:  st.Mode().String(),
		ModifiedTime: timestamppb.New(st.ModTime()),
		Type:         fileType(st.Mode()),
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		e.Owner = userName(sys.Uid)
		e.Group = groupName(sys.Gid)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		// The target is given absolute and resolved, as E2B's agent gives
		// it; a dangling link's target as far as it goes.
		if target, err := filepath.EvalSymlinks(path); err == nil {
			e.SymlinkTarget = &target
		} else if target, err := os.Readlink(path); err == nil {
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(path), target)
			}
			target = filepath.Clean(target)
			e.SymlinkTarget = &target
		}
		// Like envd, report a symlink to a directory or file as that type.
		if t, err := os.Stat(path); err == nil {
			e.Type = fileType(t.Mode())
		}
	}
	e.Metadata = ReadMetadata(path)
	return e
}

func fileType(m fs.FileMode) pb.FileType {
	switch {
	case m.IsDir():
		return pb.FileType_FILE_TYPE_DIRECTORY
	case m&fs.ModeSymlink != 0:
		return pb.FileType_FILE_TYPE_SYMLINK
	default:
		return pb.FileType_FILE_TYPE_FILE
	}
}

// ReadMetadata returns the user metadata stored on path, nil if none.
func ReadMetadata(path string) map[string]string {
	size, err := unix.Llistxattr(path, nil)
	if err != nil || size <= 0 {
		return nil
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(path, buf); err != nil {
		return nil
	}
	var out map[string]string
	start := 0
	for i := 0; i < size; i++ {
		if buf[i] != 0 {
			continue
		}
		name := string(buf[start:i])
		start = i + 1
		if len(name) <= len(MetadataXattrPrefix) || name[:len(MetadataXattrPrefix)] != MetadataXattrPrefix {
			continue
		}
		val := make([]byte, 4096)
		n, err := unix.Lgetxattr(path, name, val)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name[len(MetadataXattrPrefix):]] = string(val[:n])
	}
	return out
}

func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// PathError classifies a filesystem error on path by kind.
func PathError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errs.New(errs.NotFound, "path '%s' does not exist", path)
	case errors.Is(err, fs.ErrPermission):
		return errs.New(errs.PermissionDenied, "permission denied: '%s'", path)
	case errors.Is(err, syscall.ENOTDIR):
		return errs.New(errs.InvalidArgument, "a component of '%s' is not a directory", path)
	case errors.Is(err, syscall.EROFS):
		return errs.New(errs.PermissionDenied, "'%s' is on a read-only file system", path)
	case errors.Is(err, syscall.ETXTBSY):
		return errs.New(errs.Conflict, "'%s' is a program running now", path)
	case errors.Is(err, syscall.EBUSY):
		return errs.New(errs.Conflict, "'%s' is in use (a mount point)", path)
	case errors.Is(err, syscall.EISDIR):
		return errs.New(errs.InvalidArgument, "path '%s' is a directory", path)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return errs.New(errs.ResourceExhausted, "no space left for '%s'", path)
	default:
		return errs.New(errs.Internal, "%s: %v", path, err)
	}
}
