package filesystem

import (
	"context"
	"os"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// Remove deletes a path and everything under it; a missing path is fine.
// The agent runs inside the sandbox's own mount namespace and root, so this
// can only reach the sandbox's file system.
func (s *Service) Remove(ctx context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	u, p, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	if p == "/" {
		return nil, errs.ConnectError(errs.New(errs.InvalidArgument, "refusing to remove /"))
	}
	if err := identity.As(u, func() error { return os.RemoveAll(p) }); err != nil {
		return nil, errs.ConnectError(PathError(p, err))
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}
