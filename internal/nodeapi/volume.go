package nodeapi

import (
	"context"
	"net/http"
	"net/http/httputil"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/volume"
)

// A cluster's volume lives on one node: its records are the cluster's
// (in the database), its files the node's. The replica that makes one
// chooses its id and node; sandboxes that mount it run there; the
// content API reaches its files through the node (Client.VolumeFiles).

// ServeVolumes serves the node's volumes, and their content with files
// (behind the node token). Call it before serving.
func (s *Server) ServeVolumes(vols *volume.Store, files http.Handler) {
	s.volumes, s.volumeFiles = vols, files
}

// volumesHere refuses volume calls on a node that keeps none.
func (s *Server) volumesHere() error {
	if s.volumes == nil {
		return errs.New(errs.Unimplemented, "this node keeps no volumes")
	}
	return nil
}

// CreateVolume makes a volume under the replica's id.
func (s *Server) CreateVolume(_ context.Context, r *connect.Request[pb.Volume]) (*connect.Response[pb.Volume], error) {
	if err := s.volumesHere(); err != nil {
		return nil, errs.ConnectError(err)
	}
	v, err := s.volumes.CreateAs(r.Msg.GetId(), r.Msg.GetTeam(), r.Msg.GetName())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(volumeToPB(v)), nil
}

// DeleteVolume removes a volume and its files.
func (s *Server) DeleteVolume(_ context.Context, r *connect.Request[pb.VolumeRef]) (*connect.Response[pb.Empty], error) {
	if err := s.volumesHere(); err != nil {
		return nil, errs.ConnectError(err)
	}
	if err := s.volumes.DeleteByID(r.Msg.GetId()); err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(&pb.Empty{}), nil
}

// serveVolumeFiles serves the content API's requests a replica forwards.
func (s *Server) serveVolumeFiles(w http.ResponseWriter, r *http.Request) {
	if err := s.check(r.Header); err != nil {
		httpError(w, err)
		return
	}
	if err := s.volumesHere(); err != nil {
		httpError(w, err)
		return
	}
	s.volumeFiles.ServeHTTP(w, r)
}

func volumeToPB(v volume.Volume) *pb.Volume {
	return &pb.Volume{Id: v.ID, Name: v.Name, Team: v.Team, SizeMb: v.SizeMB, CreatedAt: timestamppb.New(v.CreatedAt)}
}

func volumeFromPB(v *pb.Volume) volume.Volume {
	return volume.Volume{ID: v.GetId(), Name: v.GetName(), Team: v.GetTeam(), SizeMB: v.GetSizeMb(), CreatedAt: v.GetCreatedAt().AsTime()}
}

// CreateVolume makes volume v (its id, team and name) on the node.
func (c *Client) CreateVolume(ctx context.Context, v volume.Volume) (volume.Volume, error) {
	r, err := c.rpc.CreateVolume(ctx, connect.NewRequest(volumeToPB(v)))
	if err != nil {
		return volume.Volume{}, err
	}
	return volumeFromPB(r.Msg), nil
}

// DeleteVolume removes volume id from the node (one it lacks is no error).
func (c *Client) DeleteVolume(ctx context.Context, id string) error {
	_, err := c.rpc.DeleteVolume(ctx, connect.NewRequest(&pb.VolumeRef{Id: id}))
	return err
}

// VolumeFiles forwards content API requests (/volumecontent/{id}/...,
// whose volume token the caller checked) to the node, with the node
// token in place of the volume's.
func (c *Client) VolumeFiles() http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(c.base)
			pr.Out.Header.Set("Authorization", "Bearer "+c.token)
		},
		Transport: c.hc.Transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			httpError(w, errs.New(errs.Unavailable, "the volume's node: %v", err))
		},
	}
}
