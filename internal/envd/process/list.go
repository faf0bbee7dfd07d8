package process

import (
	"context"
	"slices"

	"connectrpc.com/connect"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// List returns the processes that are still running (not reaped), ordered
// by pid.
func (s *Service) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	s.mu.Lock()
	out := make([]*pb.ProcessInfo, 0, len(s.procs))
	for _, p := range s.procs {
		select {
		case <-p.reaped:
			continue
		default:
		}
		out = append(out, &pb.ProcessInfo{Config: p.config, Pid: p.pid, Tag: p.tag})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *pb.ProcessInfo) int { return int(a.Pid) - int(b.Pid) })
	return connect.NewResponse(&pb.ListResponse{Processes: out}), nil
}
