// Package agentclient talks to a sandbox's agent (envd) from the node:
// health and the process and filesystem services.
package agentclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/sdk/go/envdpb/filesystem/filesystemconnect"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

// DialFunc opens a connection to the agent.
type DialFunc func(ctx context.Context) (net.Conn, error)

// Client is a connection pool to one agent.
type Client struct {
	HTTP *http.Client
	// Raw is the pool itself: it adds no token to what it sends.
	Raw        http.RoundTripper
	Base       string
	Process    processconnect.ProcessClient
	Filesystem filesystemconnect.FilesystemClient
	mu         sync.Mutex
	token      string
}

// tokenTransport adds the agent's access token to every request.
type tokenTransport struct {
	c    *Client
	next http.RoundTripper
}

func (t tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if tok := t.c.Token(); tok != "" && req.Header.Get("X-Access-Token") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("X-Access-Token", tok)
	}
	return t.next.RoundTrip(req)
}

// New returns a client that reaches the agent through dial.
func New(dial DialFunc) *Client {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	c := &Client{Base: "http://" + envdwire.Host, Raw: tr}
	c.HTTP = &http.Client{Transport: tokenTransport{c: c, next: tr}}
	c.Process = processconnect.NewProcessClient(c.HTTP, c.Base)
	c.Filesystem = filesystemconnect.NewFilesystemClient(c.HTTP, c.Base)
	return c
}

// Close drops idle connections.
func (c *Client) Close() { c.HTTP.CloseIdleConnections() }

// Token is the access token the client sends ("" = none).
func (c *Client) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// Health reports whether the agent answers GET /health with 204.
func (c *Client) Health(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("agent health: %s", resp.Status)
	}
	return nil
}

// Init sends POST /init (settings for an agent that started without them:
// a warm sandbox handed to its user) and then sends the token it set.
func (c *Client) Init(ctx context.Context, in envd.InitRequest) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+"/init", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("agent init: %s: %s", resp.Status, msg)
	}
	if in.AccessToken != nil {
		c.SetToken(*in.AccessToken)
	}
	return nil
}

// Result is a finished command.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int32
	Status         string
	Error          string
}

// Run runs cmd with bash -c as user ("" = the agent's default) and collects
// its output; timeout bounds the process (0 = none).
func (c *Client) Run(ctx context.Context, user, cmd string, timeout time.Duration) (Result, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var res Result
	err := c.Exec(ctx, Command{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}, User: user}, func(stdout, stderr []byte) {
		res.Stdout = append(res.Stdout, stdout...)
		res.Stderr = append(res.Stderr, stderr...)
	}, &res)
	return res, err
}

// Command is a process to start in the sandbox.
type Command struct {
	Cmd  string
	Args []string
	User string // "" = the agent's default
	Cwd  string // "" = the user's default
	Env  map[string]string
	// Background returns once the process started; it goes on after the
	// call, and ctx's deadline does not bound it.
	Background bool
}

// Exec starts cmd, passing its output to out as it comes, and fills res
// when it ends (or, in the background, once it started).
func (c *Client) Exec(ctx context.Context, cmd Command, out func(stdout, stderr []byte), res *Result) error {
	cfg := &pb.ProcessConfig{Cmd: cmd.Cmd, Args: cmd.Args, Envs: cmd.Env}
	if cmd.Cwd != "" {
		cfg.Cwd = &cmd.Cwd
	}
	req := connect.NewRequest(&pb.StartRequest{Process: cfg, Stdin: new(bool)})
	if cmd.User != "" {
		req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cmd.User+":")))
	}
	if cmd.Background {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
	}
	stream, err := c.Process.Start(ctx, req)
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if cmd.Background && ev.GetStart() != nil {
			return nil
		}
		if d := ev.GetData(); d != nil {
			out(d.GetStdout(), d.GetStderr())
		}
		if e := ev.GetEnd(); e != nil {
			res.ExitCode, res.Status, res.Error = e.GetExitCode(), e.GetStatus(), e.GetError()
			return nil
		}
	}
	if err := stream.Err(); err != nil {
		return err
	}
	return fmt.Errorf("stream ended without an end event")
}

// SetToken sets the access token sent with every call.
func (c *Client) SetToken(token string) {
	c.mu.Lock()
	c.token = token
	c.mu.Unlock()
}
