package process

import (
	"context"
	"errors"
	"os"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// SendInput writes to a process's stdin or PTY.
func (s *Service) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	p, err := s.findRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	if err := p.write(req.Msg.GetInput()); err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// StreamInput takes a start message naming the process, then data messages
// written to it in order.
func (s *Service) StreamInput(ctx context.Context, stream *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *pb.StreamInputRequest_Start:
			found, err := s.findRunning(ev.Start.GetProcess())
			if err != nil {
				return nil, errs.ConnectError(err)
			}
			p = found
		case *pb.StreamInputRequest_Data:
			if p == nil {
				return nil, errs.ConnectError(errs.New(errs.InvalidArgument, "input before the start message"))
			}
			if err := p.write(ev.Data.GetInput()); err != nil {
				return nil, errs.ConnectError(err)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.StreamInputResponse{}), nil
}

func (p *proc) write(in *pb.ProcessInput) error {
	p.stdinM.Lock()
	defer p.stdinM.Unlock()
	switch v := in.GetInput().(type) {
	case *pb.ProcessInput_Stdin:
		if p.pty != nil {
			return errs.New(errs.InvalidArgument, "process %d has a pty: send pty input", p.pid)
		}
		if p.stdin == nil {
			return errs.New(errs.InvalidArgument, "process %d has no stdin (start it with stdin enabled)", p.pid)
		}
		if _, err := p.stdin.Write(v.Stdin); err != nil {
			return writeErr(p.pid, err)
		}
	case *pb.ProcessInput_Pty:
		if p.pty == nil {
			return errs.New(errs.InvalidArgument, "process %d has no pty", p.pid)
		}
		if _, err := p.pty.Write(v.Pty); err != nil {
			return writeErr(p.pid, err)
		}
	default:
		return errs.New(errs.InvalidArgument, "input is empty")
	}
	return nil
}

func writeErr(pid uint32, err error) error {
	if errors.Is(err, os.ErrClosed) {
		return errs.New(errs.InvalidArgument, "stdin of process %d is closed", pid)
	}
	return errs.New(errs.Internal, "write to process %d: %v", pid, err)
}
