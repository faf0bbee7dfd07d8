package nodeapi

import (
	"context"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Sample implements the Sample RPC: a sandbox that ends meanwhile is left
// out.
func (s *Server) Sample(ctx context.Context, _ *connect.Request[pb.Empty]) (*connect.Response[pb.SampleList], error) {
	list, err := s.mgr.List(ctx)
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	out := &pb.SampleList{}
	for _, info := range list {
		if info.State != sandboxes.StateRunning {
			continue
		}
		st, err := s.mgr.Stats(ctx, info.ID)
		if err != nil && !errs.Is(err, errs.Unimplemented) {
			if !errs.Is(err, errs.NotFound) {
				s.log.Debug("sample a sandbox", logx.SandboxID(info.ID), logx.Err(err))
			}
			continue
		}
		out.Samples = append(out.Samples, &pb.SandboxSample{Sandbox: infoToPB(info), Stats: statsToPB(st)})
	}
	return connect.NewResponse(out), nil
}

// Sample returns the node's running sandboxes with their use now.
func (c *Client) Sample(ctx context.Context) ([]sandboxes.Sample, error) {
	r, err := c.rpc.Sample(ctx, connect.NewRequest(&pb.Empty{}))
	if err != nil {
		return nil, err
	}
	out := make([]sandboxes.Sample, 0, len(r.Msg.GetSamples()))
	for _, m := range r.Msg.GetSamples() {
		info, err := infoFromPB(m.GetSandbox())
		if err != nil {
			return nil, err
		}
		out = append(out, sandboxes.Sample{Info: info, Stats: statsFromPB(m.GetStats())})
	}
	return out, nil
}
