package filesystem

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// WatchDir streams {"start":{}} and then the directory's events, with a
// keepalive after every quiet Keepalive-Ping-Interval.
func (s *Service) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	_, p, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return errs.ConnectError(err)
	}
	d, err := newDirWatch(p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return errs.ConnectError(err)
	}
	defer d.close()
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	interval := settings.KeepaliveInterval(req.Header())
	keepalive := time.NewTimer(interval)
	defer keepalive.Stop()
	for {
		var msgs []*pb.WatchDirResponse
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-d.w.Events:
			if !ok {
				return nil
			}
			for _, fe := range d.convert(ev) {
				msgs = append(msgs, &pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: fe}})
			}
			if len(msgs) == 0 {
				continue
			}
		case err := <-d.w.Errors:
			return errs.ConnectError(errs.New(errs.Internal, "watch %s: %v", p, err))
		case <-keepalive.C:
			msgs = []*pb.WatchDirResponse{{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}}}
		}
		for _, msg := range msgs {
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
		keepalive.Reset(interval)
	}
}
