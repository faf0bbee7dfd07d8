package process

import (
	"context"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// Connect attaches to a process: start{pid}, then only new output, then its
// end. A process that ended within the last 30 s replays its end event.
func (s *Service) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return errs.ConnectError(err)
	}
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.ConnectResponse{Event: ev}) }
	sub, end := p.subscribe()
	if sub != nil {
		defer p.unsubscribe(sub)
	}
	if err := send(startEvent(p.pid)); err != nil {
		return err
	}
	if end != nil {
		return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
	}
	return relay(ctx, sub, settings.KeepaliveInterval(req.Header()), send)
}
