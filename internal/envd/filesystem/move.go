package filesystem

import (
	"context"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

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
	if _, err := os.Lstat(src); err != nil {
		return nil, errs.ConnectError(PathError(src, err))
	}
	if err := MkdirAllOwned(filepath.Dir(dst), u); err != nil {
		return nil, errs.ConnectError(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, errs.ConnectError(PathError(dst, err))
	}
	e, err := Entry(dst)
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: e}), nil
}
