package process

import (
	"context"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// Start runs a new process and streams start, data and end events. The
// request deadline (Connect-Timeout-Ms) bounds the process's life; the client
// going away does not end the process.
func (s *Service) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	name, err := identity.NameFromBasicAuth(req.Header())
	if err != nil {
		return errs.ConnectError(err)
	}
	u, err := identity.Resolve(name, s.settings.DefaultUser())
	if err != nil {
		return errs.ConnectError(err)
	}
	p, sub, err := s.spawn(req.Msg, u)
	if err != nil {
		return errs.ConnectError(err)
	}
	defer p.unsubscribe(sub)
	s.killAfter(ctx, p)
	send := func(ev *pb.ProcessEvent) error { return stream.Send(&pb.StartResponse{Event: ev}) }
	if err := send(startEvent(p.pid)); err != nil {
		return err
	}
	return relay(ctx, sub, settings.KeepaliveInterval(req.Header()), send)
}
