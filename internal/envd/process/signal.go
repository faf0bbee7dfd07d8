package process

import (
	"context"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// SendSignal sends SIGTERM or SIGKILL to a process and its process group.
func (s *Service) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	var sig unix.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = unix.SIGKILL
	case pb.Signal_SIGNAL_SIGTERM:
		sig = unix.SIGTERM
	default:
		return nil, errs.ConnectError(errs.New(errs.InvalidArgument, "unsupported signal %v", req.Msg.GetSignal()))
	}
	p, err := s.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	if err := unix.Kill(-int(p.pid), sig); err != nil {
		if err := unix.Kill(int(p.pid), sig); err != nil {
			return nil, errs.ConnectError(errs.New(errs.NotFound, "signal process %d: %v", p.pid, err))
		}
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}
