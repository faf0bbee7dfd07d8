package nodeapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/nodeapi/nodepb/nodepbconnect"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// callTimeout bounds the calls whose callers give no context (the
// in-process manager's quick lookups, remote here).
const callTimeout = 30 * time.Second

// Client calls a node's API: what an API replica uses in place of an
// in-process manager, answering as it does.
type Client struct {
	base  *url.URL
	token string
	tls   *tls.Config
	hc    *http.Client
	rpc   nodepbconnect.NodeClient
}

var _ Manager = (*Client)(nil)

// NewClient calls the node at baseURL (http:// or https://) with token;
// hc carries the calls, tlsConfig (hc's transport's, or nil) serves the
// byte streams of Dial. (It is passed, not read from hc's transport,
// which sets it up lazily on its first call: a data race.)
func NewClient(baseURL, token string, hc *http.Client, tlsConfig *tls.Config) (*Client, error) {
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, errs.New(errs.InvalidArgument, "node URL %q: want http://host:port or https://host:port", baseURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	rpc := nodepbconnect.NewNodeClient(hc, base.String(), connect.WithInterceptors(bearer(token), connect.UnaryInterceptorFunc(nodeGone)))
	return &Client{base: base, token: token, tls: tlsConfig, hc: hc, rpc: rpc}, nil
}

func info(r *connect.Response[pb.Sandbox], err error) (sandboxes.Info, error) {
	if err != nil {
		return sandboxes.Info{}, err
	}
	return infoFromPB(r.Msg)
}

// Create starts a sandbox on the node.
func (c *Client) Create(ctx context.Context, req sandboxes.CreateRequest) (sandboxes.Info, error) {
	m, err := createToPB(req)
	if err != nil {
		return sandboxes.Info{}, err
	}
	return info(c.rpc.Create(ctx, connect.NewRequest(m)))
}

// Kill ends a sandbox.
func (c *Client) Kill(ctx context.Context, id string) error {
	_, err := c.rpc.Kill(ctx, connect.NewRequest(&pb.SandboxRef{Id: id}))
	return err
}

// Get returns a sandbox the node runs.
func (c *Client) Get(ctx context.Context, id string) (sandboxes.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return info(c.rpc.Get(ctx, connect.NewRequest(&pb.SandboxRef{Id: id})))
}

// List returns the node's sandboxes, or why it cannot.
func (c *Client) List(ctx context.Context) ([]sandboxes.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	r, err := c.rpc.List(ctx, connect.NewRequest(&pb.Empty{}))
	if err != nil {
		return nil, err
	}
	out := make([]sandboxes.Info, 0, len(r.Msg.GetSandboxes()))
	for _, sb := range r.Msg.GetSandboxes() {
		in, err := infoFromPB(sb)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

func (c *Client) retime(ctx context.Context, id string, timeout time.Duration, extend bool) (sandboxes.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return info(c.rpc.SetTimeout(ctx, connect.NewRequest(&pb.TimeoutRequest{Id: id, Timeout: durationpb.New(timeout), Extend: extend})))
}

// SetTimeout makes a sandbox end timeout from now.
func (c *Client) SetTimeout(ctx context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	return c.retime(ctx, id, timeout, false)
}

// ExtendTimeout moves a sandbox's end to timeout from now unless it ends
// later already.
func (c *Client) ExtendTimeout(ctx context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	return c.retime(ctx, id, timeout, true)
}

// Stats returns a sandbox's resource use.
func (c *Client) Stats(ctx context.Context, id string) (isolation.Stats, error) {
	r, err := c.rpc.Stats(ctx, connect.NewRequest(&pb.SandboxRef{Id: id}))
	if err != nil {
		return isolation.Stats{}, err
	}
	return statsFromPB(r.Msg), nil
}

// AgentLog returns the end of a sandbox's agent log.
func (c *Client) AgentLog(ctx context.Context, id string) ([]byte, error) {
	r, err := c.rpc.AgentLog(ctx, connect.NewRequest(&pb.SandboxRef{Id: id}))
	if err != nil {
		return nil, err
	}
	return r.Msg.GetLog(), nil
}

// UpdateNetwork changes a sandbox's egress.
func (c *Client) UpdateNetwork(ctx context.Context, id string, u sandboxes.NetworkUpdate) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.rpc.UpdateNetwork(ctx, connect.NewRequest(networkToPB(id, u)))
	return err
}

// Pause pauses a sandbox with its memory; strict refuses one whose agent
// does not answer.
func (c *Client) Pause(ctx context.Context, id string, strict bool) (sandboxes.Info, error) {
	return info(c.rpc.Pause(ctx, connect.NewRequest(&pb.PauseRequest{Id: id, Memory: true, Strict: strict})))
}

// PauseFiles pauses a sandbox keeping its files only.
func (c *Client) PauseFiles(ctx context.Context, id string) (sandboxes.Info, error) {
	return info(c.rpc.Pause(ctx, connect.NewRequest(&pb.PauseRequest{Id: id})))
}

// Resize gives a paused sandbox l's CPUs and memory; the quota is the
// node's own (CreateRequest.Quota is in process only).
func (c *Client) Resize(ctx context.Context, id string, l isolation.Limits, _ *sandboxes.TeamQuota) (sandboxes.Info, error) {
	return info(c.rpc.Resize(ctx, connect.NewRequest(&pb.ResizeRequest{Id: id, Limits: limitsToPB(l)})))
}

// Resume resumes a paused sandbox for timeout.
func (c *Client) Resume(ctx context.Context, id string, timeout time.Duration) (sandboxes.Info, error) {
	return info(c.rpc.Resume(ctx, connect.NewRequest(&pb.ResumeRequest{Id: id, Timeout: durationpb.New(timeout)})))
}

// Wake reports whether a sandbox runs, resuming it first when it is
// paused with auto-resume; false when the node cannot be reached.
func (c *Client) Wake(ctx context.Context, id string) bool {
	r, err := c.rpc.Wake(ctx, connect.NewRequest(&pb.SandboxRef{Id: id}))
	return err == nil && r.Msg.GetRunning()
}

// Dial connects to port inside a sandbox through the node.
func (c *Client) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	return dial(ctx, c.base, c.tls, c.token, id, port)
}

// Event is a sandbox's end (Ended) or a state the node gave it itself.
type Event struct {
	Ended bool
	Info  sandboxes.Info
}

// Follow calls onEvent with the node's events until ctx ends. Each time
// it is following anew — first, and after the stream broke (events in
// between are lost) — it calls onFollow first, where the caller catches
// up (List). It waits up to a second between attempts.
func (c *Client) Follow(ctx context.Context, onFollow func(), onEvent func(Event), log *slog.Logger) {
	for wait := 100 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, time.Second) {
		err := c.follow(ctx, onFollow, onEvent, func() { wait = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		log.Warn("node events broke off; following again", "node", c.base.Host, logx.Err(err))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func (c *Client) follow(ctx context.Context, onFollow func(), onEvent func(Event), started func()) error {
	stream, err := c.rpc.Events(ctx, connect.NewRequest(&pb.Empty{}))
	if err != nil {
		return err
	}
	defer stream.Close()
	// The node's first message says the stream is open: catch up then.
	if !stream.Receive() {
		return fmt.Errorf("node %s: events: %w", c.base.Host, stream.Err())
	}
	started()
	onFollow()
	for stream.Receive() {
		ev := stream.Msg()
		in, err := infoFromPB(ev.GetSandbox())
		if err != nil {
			return err
		}
		onEvent(Event{Ended: ev.GetKind() == pb.Event_KIND_ENDED, Info: in})
	}
	return fmt.Errorf("node %s: events: %w", c.base.Host, stream.Err())
}

// Receive has the node take over a sandbox from the paused state another
// node reported of it (in.PausedState).
func (c *Client) Receive(ctx context.Context, in sandboxes.Info) (sandboxes.Info, error) {
	if len(in.PausedState) == 0 {
		return sandboxes.Info{}, errs.New(errs.Conflict, "sandbox %s has no shared paused state: it cannot move", in.ID)
	}
	return info(c.rpc.Receive(ctx, connect.NewRequest(&pb.ReceiveRequest{PausedState: in.PausedState})))
}
