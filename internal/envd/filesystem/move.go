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

// Move renames source to destination, creating the destination's parents.
func (s *Service) Move(ctx context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	u, src, err := s.resolve(req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	_, dst, err := s.resolve(req.Header(), req.Msg.GetDestination())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	var e *pb.EntryInfo
	err = identity.As(u, func() error {
		if _, err := os.Lstat(src); err != nil {
			return PathError(src, err)
		}
		if err := MkdirAllOwned(filepath.Dir(dst), u); err != nil {
			return err
		}
		if err := os.Rename(src, dst); err != nil {
			return PathError(dst, err)
		}
		e, err = Entry(dst)
		return err
	})
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}
