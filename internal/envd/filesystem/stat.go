package filesystem

import (
	"context"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// Stat describes one path; a missing path is NotFound.
func (s *Service) Stat(ctx context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	u, p, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	var e *pb.EntryInfo
	err = identity.As(u, func() (err error) { e, err = Entry(p); return err })
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: e}), nil
}
