package process

import (
	"context"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// Update resizes a process's PTY.
func (s *Service) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	p, err := s.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	if req.Msg.Pty != nil {
		if p.pty == nil {
			return nil, errs.ConnectError(errs.New(errs.InvalidArgument, "process %d has no pty", p.pid))
		}
		size := req.Msg.GetPty().GetSize()
		if err := pty.Setsize(p.pty, &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}); err != nil {
			return nil, errs.ConnectError(errs.New(errs.Internal, "resize pty of %d: %v", p.pid, err))
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}
