// Package nodeapi is the node-internal API (api/node/v1/node.proto): a
// node serves its sandbox manager to API replicas (Server), which call it
// through Client. Every request carries the cluster's node token.
package nodeapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/covesandbox/cove/internal/connguard"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/nodeapi/nodepb/nodepbconnect"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/volume"
)

// Manager is what a node serves: its sandbox manager (*node.Manager), as
// sandboxes.Node and what only the API replicas ask besides (the proxy's
// wake and dial, a takeover's receive).
type Manager interface {
	sandboxes.Node
	Wake(ctx context.Context, id string) bool
	Dial(ctx context.Context, id string, port int) (net.Conn, error)
	Receive(ctx context.Context, info sandboxes.Info) (sandboxes.Info, error)
}

// Server serves a node's manager.
type Server struct {
	mgr    Manager
	token  string
	log    *slog.Logger
	events *hub
	// builder, when set, runs template builds (ServeBuilds); layerPath
	// finds a stored layer by name (ServeBuilds).
	builder   Builder
	buildLogs BuildLogs
	layers    Layers
	// volumes and volumeFiles, when set, keep and serve the node's
	// volumes (ServeVolumes).
	volumes     *volume.Store
	volumeFiles http.Handler
	// copies are the SaveLayer copies kept for callers, by handle.
	copiesMu sync.Mutex
	copies   map[string]*keptCopy
	// tunnels are the callers' connections /dial took over, with their
	// sandbox's id: Close ends them, as the node's exit would (the HTTP
	// server's shutdown does not know them), and a sandbox's pause ends
	// its own (a replica's pooled connection into a frozen sandbox would
	// take a request and never answer it).
	tunnelsMu sync.Mutex
	tunnels   map[net.Conn]string // nil once closed
}

var _ nodepbconnect.NodeHandler = (*Server)(nil)

// NewServer serves mgr to callers that present token.
func NewServer(mgr Manager, token string, log *slog.Logger) (*Server, error) {
	if len(token) < 32 {
		return nil, errs.New(errs.InvalidArgument, "the node token must have at least 32 characters")
	}
	return &Server{mgr: mgr, token: token, log: log, events: newHub(), copies: map[string]*keptCopy{},
		tunnels: map[net.Conn]string{}}, nil
}

// Handler is the API's HTTP handler: the Connect service and /dial.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	path, h := nodepbconnect.NewNodeHandler(s, connect.WithInterceptors(s.auth()))
	mux.Handle(path, h)
	mux.HandleFunc("GET /dial", s.serveDial)
	mux.HandleFunc("/volumecontent/{volumeID}/", s.serveVolumeFiles)
	// Liveness for an orchestrator's probes: no token, nothing told.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.check(r.Header) == nil { // each route checks it again
			connguard.Authenticated(r.Context())
		}
		mux.ServeHTTP(w, r)
	})
}

// auth refuses calls without the node token.
func (s *Server) auth() connect.Interceptor {
	return authInterceptor(func(h http.Header) error { return s.check(h) })
}

func (s *Server) check(h http.Header) error {
	got, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
		return errs.New(errs.Unauthenticated, "missing or wrong node token")
	}
	return nil
}

// Close ends the event streams (their followers reconnect, to this node
// when it is back) and the byte streams to sandboxes' ports: a node that
// stops calls it before it shuts down.
func (s *Server) Close() {
	s.events.close()
	s.tunnelsMu.Lock()
	defer s.tunnelsMu.Unlock()
	for c := range s.tunnels {
		c.Close()
	}
	s.tunnels = nil
}

// tunnel keeps a connection /dial took over to sandbox id until Close,
// unless the server is closed already.
func (s *Server) tunnel(c net.Conn, id string) bool {
	s.tunnelsMu.Lock()
	defer s.tunnelsMu.Unlock()
	if s.tunnels == nil {
		return false
	}
	s.tunnels[c] = id
	return true
}

// closeTunnels ends the connections /dial took over to sandbox id.
func (s *Server) closeTunnels(id string) {
	s.tunnelsMu.Lock()
	defer s.tunnelsMu.Unlock()
	for c, to := range s.tunnels {
		if to == id {
			c.Close()
		}
	}
}

// untunnel forgets a connection tunnel kept.
func (s *Server) untunnel(c net.Conn) {
	s.tunnelsMu.Lock()
	defer s.tunnelsMu.Unlock()
	delete(s.tunnels, c)
}

// Ended and StateChanged publish the node's events (node.Config's OnEnd
// and OnState) to the API replicas that follow them.
func (s *Server) Ended(info sandboxes.Info) { s.events.publish(pb.Event_KIND_ENDED, info) }

// StateChanged publishes a pause or resume the node made itself.
func (s *Server) StateChanged(info sandboxes.Info) {
	if info.State == sandboxes.StatePaused {
		s.closeTunnels(info.ID)
	}
	s.events.publish(pb.Event_KIND_STATE, info)
}

func reply[T any](m *T, err error) (*connect.Response[T], error) {
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(m), nil
}

func sandbox(info sandboxes.Info, err error) (*connect.Response[pb.Sandbox], error) {
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(infoToPB(info)), nil
}

// Create implements nodepbconnect.NodeHandler.
func (s *Server) Create(ctx context.Context, r *connect.Request[pb.CreateRequest]) (*connect.Response[pb.Sandbox], error) {
	req, err := createFromPB(r.Msg)
	if err == nil {
		err = s.savedFromPB(r.Msg, &req)
	}
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return sandbox(s.mgr.Create(ctx, req))
}

// Kill implements nodepbconnect.NodeHandler.
func (s *Server) Kill(ctx context.Context, r *connect.Request[pb.SandboxRef]) (*connect.Response[pb.Empty], error) {
	return reply(&pb.Empty{}, s.mgr.Kill(ctx, r.Msg.GetId()))
}

// Get implements nodepbconnect.NodeHandler.
func (s *Server) Get(ctx context.Context, r *connect.Request[pb.SandboxRef]) (*connect.Response[pb.Sandbox], error) {
	return sandbox(s.mgr.Get(ctx, r.Msg.GetId()))
}

// List implements nodepbconnect.NodeHandler.
func (s *Server) List(ctx context.Context, _ *connect.Request[pb.Empty]) (*connect.Response[pb.SandboxList], error) {
	list, err := s.mgr.List(ctx)
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	out := &pb.SandboxList{}
	for _, info := range list {
		out.Sandboxes = append(out.Sandboxes, infoToPB(info))
	}
	return connect.NewResponse(out), nil
}

// SetTimeout implements nodepbconnect.NodeHandler.
func (s *Server) SetTimeout(ctx context.Context, r *connect.Request[pb.TimeoutRequest]) (*connect.Response[pb.Sandbox], error) {
	if r.Msg.GetExtend() {
		return sandbox(s.mgr.ExtendTimeout(ctx, r.Msg.GetId(), r.Msg.GetTimeout().AsDuration()))
	}
	return sandbox(s.mgr.SetTimeout(ctx, r.Msg.GetId(), r.Msg.GetTimeout().AsDuration()))
}

// Stats implements nodepbconnect.NodeHandler.
func (s *Server) Stats(ctx context.Context, r *connect.Request[pb.SandboxRef]) (*connect.Response[pb.SandboxStats], error) {
	st, err := s.mgr.Stats(ctx, r.Msg.GetId())
	return reply(statsToPB(st), err)
}

// AgentLog implements nodepbconnect.NodeHandler.
func (s *Server) AgentLog(ctx context.Context, r *connect.Request[pb.SandboxRef]) (*connect.Response[pb.AgentLogResponse], error) {
	b, err := s.mgr.AgentLog(ctx, r.Msg.GetId())
	return reply(&pb.AgentLogResponse{Log: b}, err)
}

// UpdateNetwork implements nodepbconnect.NodeHandler.
func (s *Server) UpdateNetwork(ctx context.Context, r *connect.Request[pb.NetworkUpdate]) (*connect.Response[pb.Empty], error) {
	u, err := networkFromPB(r.Msg)
	if err == nil {
		err = s.mgr.UpdateNetwork(ctx, r.Msg.GetId(), u)
	}
	return reply(&pb.Empty{}, err)
}

// Pause implements nodepbconnect.NodeHandler.
func (s *Server) Pause(ctx context.Context, r *connect.Request[pb.PauseRequest]) (*connect.Response[pb.Sandbox], error) {
	pause := s.mgr.PauseFiles
	if r.Msg.GetMemory() {
		pause = func(ctx context.Context, id string) (sandboxes.Info, error) {
			return s.mgr.Pause(ctx, id, r.Msg.GetStrict())
		}
	}
	info, err := pause(ctx, r.Msg.GetId())
	if err == nil {
		s.closeTunnels(info.ID)
	}
	return sandbox(info, err)
}

// Resume implements nodepbconnect.NodeHandler.
func (s *Server) Resume(ctx context.Context, r *connect.Request[pb.ResumeRequest]) (*connect.Response[pb.Sandbox], error) {
	return sandbox(s.mgr.Resume(ctx, r.Msg.GetId(), r.Msg.GetTimeout().AsDuration()))
}

// Resize implements nodepbconnect.NodeHandler.
func (s *Server) Resize(ctx context.Context, r *connect.Request[pb.ResizeRequest]) (*connect.Response[pb.Sandbox], error) {
	return sandbox(s.mgr.Resize(ctx, r.Msg.GetId(), limitsFromPB(r.Msg.GetLimits()), nil))
}

// Wake implements nodepbconnect.NodeHandler.
func (s *Server) Wake(ctx context.Context, r *connect.Request[pb.SandboxRef]) (*connect.Response[pb.WakeResponse], error) {
	return connect.NewResponse(&pb.WakeResponse{Running: s.mgr.Wake(ctx, r.Msg.GetId())}), nil
}

// Events implements nodepbconnect.NodeHandler: it streams until the
// caller goes.
func (s *Server) Events(ctx context.Context, _ *connect.Request[pb.Empty], stream *connect.ServerStream[pb.Event]) error {
	ch, leave := s.events.join()
	defer leave()
	// The response starts at once: the caller knows it follows from now.
	if err := stream.Send(&pb.Event{}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				return errs.ConnectError(errs.New(errs.Unavailable, "the node's events stopped (it is stopping, or this follower fell behind)"))
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// Receive takes over a sandbox paused on a lost node.
func (s *Server) Receive(ctx context.Context, r *connect.Request[pb.ReceiveRequest]) (*connect.Response[pb.Sandbox], error) {
	var info sandboxes.Info
	if err := json.Unmarshal(r.Msg.GetPausedState(), &info); err != nil {
		return nil, errs.ConnectError(errs.New(errs.InvalidArgument, "paused state: %v", err))
	}
	got, err := s.mgr.Receive(ctx, info)
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(infoToPB(got)), nil
}
