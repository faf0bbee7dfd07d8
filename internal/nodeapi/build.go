package nodeapi

import (
	"context"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/template"
)

// Builder runs template builds on a node (*template.Builder).
type Builder interface {
	Run(ctx context.Context, templateID, buildID string, spec template.Spec, logf func(template.LogEntry)) error
}

// BuildLogs keep builds' logs where every API replica reads them (the
// cluster's database).
type BuildLogs = template.LogStore

// ServeBuilds lets the node run builds with b, their logs kept in logs (a
// node without them refuses builds). Call it before serving.
func (s *Server) ServeBuilds(b Builder, logs BuildLogs) { s.builder, s.buildLogs = b, logs }

// Layers is the node's template store as the node API serves it
// (*template.Store): creates name its layers (a fork's children), a
// shared copy pushes them.
type Layers interface {
	LayerPath(name string) string
	PushLayers(ctx context.Context, names []string) (map[string]string, error)
	PushImage(ctx context.Context, img *template.ProcessImage) (string, error)
}

// ServeLayers serves the node's template store. Call it before serving.
func (s *Server) ServeLayers(l Layers) { s.layers = l }

// Build implements the Build RPC: the build runs while the call lasts.
func (s *Server) Build(ctx context.Context, req *connect.Request[pb.BuildRequest], stream *connect.ServerStream[pb.BuildLog]) error {
	if s.builder == nil {
		return errs.ConnectError(errs.New(errs.Unimplemented, "this node runs no builds: it has no object store to share them (--object-store)"))
	}
	var spec template.Spec
	if err := json.Unmarshal(req.Msg.GetSpec(), &spec); err != nil {
		return errs.ConnectError(errs.New(errs.InvalidArgument, "build spec: %v", err))
	}
	if err := s.buildLogs.PruneBuildLogs(ctx, template.LogKeep); err != nil {
		s.log.Warn("prune old build logs", logx.Err(err))
	}
	kept := template.NewLogSink(s.buildLogs, req.Msg.GetBuildId(), s.log)
	defer kept.Close()
	// The log goes out in order from one goroutine: Send is not safe for
	// concurrent use, and a slow caller must not stall the build for long.
	logs := make(chan *pb.BuildLog, 1024)
	done := make(chan error, 1)
	go func() {
		done <- s.builder.Run(ctx, req.Msg.GetTemplateId(), req.Msg.GetBuildId(), spec, func(e template.LogEntry) {
			kept.Add(e)
			select {
			case logs <- &pb.BuildLog{Time: timestamppb.New(e.Time), Level: e.Level, Message: e.Message, Step: e.Step}:
			case <-ctx.Done():
			}
		})
		close(logs)
	}()
	for l := range logs {
		if err := stream.Send(l); err != nil {
			for range logs { // the caller went: ctx ends the build
			}
			break
		}
	}
	if err := <-done; err != nil {
		return errs.ConnectError(err)
	}
	return nil
}

// Build runs a waiting build on the node, passing its log to logf.
func (c *Client) Build(ctx context.Context, templateID, buildID string, spec template.Spec, logf func(template.LogEntry)) error {
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	stream, err := c.rpc.Build(ctx, connect.NewRequest(&pb.BuildRequest{TemplateId: templateID, BuildId: buildID, Spec: raw}))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		m := stream.Msg()
		logf(template.LogEntry{Time: m.GetTime().AsTime(), Level: m.GetLevel(), Message: m.GetMessage(), Step: m.GetStep()})
	}
	if err := stream.Err(); err != nil {
		return fmt.Errorf("build on node %s: %w", c.base.Host, err)
	}
	return nil
}
