package process

import (
	"context"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// CloseStdin closes a process's stdin pipe, so it sees end of input.
func (s *Service) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	p, err := s.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	if p.pty != nil {
		return nil, errs.ConnectError(errs.New(errs.InvalidArgument, "process %d has a pty: its stdin cannot be closed", p.pid))
	}
	p.stdinM.Lock()
	defer p.stdinM.Unlock()
	if p.stdin == nil {
		return nil, errs.ConnectError(errs.New(errs.InvalidArgument, "process %d has no stdin", p.pid))
	}
	_ = p.stdin.Close() // later writes fail with os.ErrClosed
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}
