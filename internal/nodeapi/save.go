package nodeapi

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/ids"
	"github.com/covesandbox/cove/internal/logx"
	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
)

// copyKeep is how long a node keeps a copy its caller never released (a
// replica that went away mid-fork).
const copyKeep = time.Hour

// keptCopy is a SaveLayer copy held for a caller.
type keptCopy struct {
	copy  sandboxes.Copy
	timer *time.Timer
}

// SaveLayer implements the SaveLayer RPC: the copy stays on the node, for
// the children created on it, until Release.
func (s *Server) SaveLayer(ctx context.Context, req *connect.Request[pb.SaveLayerRequest]) (*connect.Response[pb.SavedCopy], error) {
	c, err := s.mgr.SaveLayer(ctx, req.Msg.GetId(), req.Msg.GetMemory())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	if req.Msg.GetShare() {
		if err := s.share(ctx, &c); err != nil {
			c.Release()
			return nil, errs.ConnectError(err)
		}
	}
	out := &pb.SavedCopy{Sandbox: infoToPB(c.Info), Handle: ids.New("", 24), Blobs: c.Blobs}
	out.Layer, _ = json.Marshal(c.Layer)
	if c.Image != nil {
		out.Image, _ = json.Marshal(c.Image)
	}
	s.copiesMu.Lock()
	s.copies[out.Handle] = &keptCopy{copy: c, timer: time.AfterFunc(copyKeep, func() {
		s.log.Warn("a saved copy was never released; releasing it", logx.SandboxID(c.Info.ID))
		s.release(out.Handle)
	})}
	s.copiesMu.Unlock()
	return connect.NewResponse(out), nil
}

// share pushes a copy — the layers its sandbox stacks, its own, the
// image of its processes — to the object store, for any node to start
// from.
func (s *Server) share(ctx context.Context, c *sandboxes.Copy) error {
	if s.layers == nil {
		return errs.New(errs.Unimplemented, "this node shares nothing: it has no object store (--object-store)")
	}
	names := []string{c.Layer.Name}
	for _, l := range c.Info.Layers {
		names = append(names, filepath.Base(l))
	}
	blobs, err := s.layers.PushLayers(ctx, names)
	if err != nil {
		return err
	}
	c.Blobs = blobs
	if c.Image != nil {
		img := *c.Image
		if img.Blob, err = s.layers.PushImage(ctx, &img); err != nil {
			return err
		}
		c.Image = &img
	}
	return nil
}

// Release implements the Release RPC (an unknown handle is no error).
func (s *Server) Release(_ context.Context, req *connect.Request[pb.ReleaseRequest]) (*connect.Response[pb.Empty], error) {
	s.release(req.Msg.GetHandle())
	return connect.NewResponse(&pb.Empty{}), nil
}

func (s *Server) release(handle string) {
	s.copiesMu.Lock()
	k := s.copies[handle]
	delete(s.copies, handle)
	s.copiesMu.Unlock()
	if k != nil {
		k.timer.Stop()
		k.copy.Release()
	}
}

// keptImage is the copy of processes named name among those the node
// holds for callers: a create may start from no other.
func (s *Server) keptImage(name string) (*template.ProcessImage, bool) {
	s.copiesMu.Lock()
	defer s.copiesMu.Unlock()
	for _, k := range s.copies {
		if img := k.copy.Image; img != nil && img.Name == name {
			return img, true
		}
	}
	return nil, false
}

// savedFromPB fills a create's fork fields: its layers found by name in
// the node's store, the saved layer's manifest, a kept image.
func (s *Server) savedFromPB(r *pb.CreateRequest, out *sandboxes.CreateRequest) error {
	for _, name := range r.GetLayers() {
		if s.layers == nil || name != filepath.Base(name) || !strings.HasPrefix(name, "sha256-") {
			return errs.New(errs.InvalidArgument, "layer %q: not a layer of this node", name)
		}
		out.Layers = append(out.Layers, s.layers.LayerPath(name))
	}
	if len(r.GetSaved()) > 0 {
		out.Saved = &template.LayerSum{}
		if err := json.Unmarshal(r.GetSaved(), out.Saved); err != nil {
			return errs.New(errs.InvalidArgument, "saved layer: %v", err)
		}
	}
	if len(r.GetImage()) > 0 {
		var img template.ProcessImage
		if err := json.Unmarshal(r.GetImage(), &img); err != nil {
			return errs.New(errs.InvalidArgument, "image: %v", err)
		}
		kept, ok := s.keptImage(img.Name)
		if !ok {
			return errs.New(errs.NotFound, "copy of processes %s is not kept on this node", img.Name)
		}
		out.Image = kept
	}
	return nil
}

// savedToPB puts a create's fork fields on the wire.
func savedToPB(r sandboxes.CreateRequest, out *pb.CreateRequest) {
	out.Layers = sandboxes.LayerNames(r.Layers)
	if r.Saved != nil {
		out.Saved, _ = json.Marshal(r.Saved)
	}
	if r.Image != nil {
		out.Image, _ = json.Marshal(r.Image)
	}
}

// SaveLayer copies a sandbox's files (and processes) on its node; the
// copy's Release lets the node drop it.
func (c *Client) SaveLayer(ctx context.Context, id string, memory bool) (sandboxes.Copy, error) {
	return c.saveLayer(ctx, id, memory, false)
}

// ShareLayer copies a sandbox's files (and, with memory, processes) on
// its node and pushes them, with the layers under them, to the object
// store (Blobs).
func (c *Client) ShareLayer(ctx context.Context, id string, memory bool) (sandboxes.Copy, error) {
	return c.saveLayer(ctx, id, memory, true)
}

func (c *Client) saveLayer(ctx context.Context, id string, memory, share bool) (sandboxes.Copy, error) {
	r, err := c.rpc.SaveLayer(ctx, connect.NewRequest(&pb.SaveLayerRequest{Id: id, Memory: memory, Share: share}))
	if err != nil {
		return sandboxes.Copy{}, err
	}
	info, err := infoFromPB(r.Msg.GetSandbox())
	if err != nil {
		return sandboxes.Copy{}, err
	}
	var layer template.LayerSum
	if err := json.Unmarshal(r.Msg.GetLayer(), &layer); err != nil {
		return sandboxes.Copy{}, err
	}
	var img *template.ProcessImage
	if raw := r.Msg.GetImage(); len(raw) > 0 {
		img = &template.ProcessImage{}
		if err := json.Unmarshal(raw, img); err != nil {
			return sandboxes.Copy{}, err
		}
	}
	handle := r.Msg.GetHandle()
	return sandboxes.NewCopy(info, layer, img, r.Msg.GetBlobs(), func() {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.rpc.Release(rctx, connect.NewRequest(&pb.ReleaseRequest{Handle: handle}))
	}), nil
}
