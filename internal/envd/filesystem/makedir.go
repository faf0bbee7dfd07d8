package filesystem

import (
	"context"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// MakeDir creates a directory and its parents, owned by the user (where
// the user could not, as MakeParents allows). An existing directory is
// AlreadyExists; an existing file is InvalidArgument.
func (s *Service) MakeDir(ctx context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	u, p, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	err = identity.As(u, func() error {
		if st, err := os.Stat(p); err == nil {
			if st.IsDir() {
				return errs.New(errs.AlreadyExists, "directory '%s' already exists", p)
			}
			return errs.New(errs.InvalidArgument, "path '%s' exists and is not a directory", p)
		}
		return nil
	})
	if err == nil {
		err = MakeParents(p, u)
	}
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	var e *pb.EntryInfo
	err = identity.As(u, func() error {
		if err := MkdirAllOwned(p, u); err != nil {
			return err
		}
		var err error
		e, err = Entry(p)
		return err
	})
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: e}), nil
}

// MkdirAllOwned creates dir and any missing parents, giving each directory
// it creates to u.
func MkdirAllOwned(dir string, u identity.User) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return errs.New(errs.InvalidArgument, "path '%s' exists and is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirAllOwned(parent, u); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return PathError(dir, err)
	}
	if err := os.Lchown(dir, int(u.UID), int(u.GID)); err != nil {
		return PathError(dir, err)
	}
	return nil
}
