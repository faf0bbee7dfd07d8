package process

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// killWait bounds how long SendSignal waits for a killed process to be
// reaped: SIGKILL ends a process at once unless it waits in the kernel
// (uninterruptible I/O).
const killWait = 10 * time.Second

// SendSignal sends SIGTERM or SIGKILL to a process and its process group.
// After SIGKILL it answers once the process is reaped: gone from the
// sandbox's process table (a caller's `kill -0 <pid>` right after fails;
// a zombie would still answer it) and from List.
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
	if sig == unix.SIGKILL {
		t := time.NewTimer(killWait)
		defer t.Stop()
		select {
		case <-p.reaped:
		case <-t.C:
			return nil, errs.ConnectError(errs.New(errs.Unavailable, "process %d was sent SIGKILL but has not ended in %s: it waits in the kernel (uninterruptible I/O)", p.pid, killWait))
		case <-ctx.Done():
			return nil, errs.ConnectError(errs.New(errs.Canceled, "waiting for process %d to end after SIGKILL: %v", p.pid, ctx.Err()))
		}
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}
