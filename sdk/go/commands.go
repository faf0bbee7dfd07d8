package cove

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

// Commands runs processes in a sandbox.
type Commands struct {
	s   *Sandbox
	rpc processconnect.ProcessClient
}

// CommandResult is how a command ended and what it printed.
type CommandResult struct {
	Stdout   string
	Stderr   string
	ExitCode int
	Err      string // the agent's description of a failure ("exit status 1", "signal: killed")
}

type commandOptions struct {
	envs                      map[string]string
	cwd, user, tag            string
	timeout                   time.Duration
	stdin                     bool
	onStdout, onStderr, onPty func([]byte)
}

// CommandOption configures a command.
type CommandOption func(*commandOptions)

// WithEnvs adds environment variables.
func WithEnvs(envs map[string]string) CommandOption {
	return func(o *commandOptions) { o.envs = envs }
}

// WithCwd sets the working directory.
func WithCwd(dir string) CommandOption { return func(o *commandOptions) { o.cwd = dir } }

// WithUser runs the command as user ("user" or "root"; default: the
// template's user).
func WithUser(user string) CommandOption { return func(o *commandOptions) { o.user = user } }

// WithTimeout bounds the command's life: the sandbox kills it after d.
func WithTimeout(d time.Duration) CommandOption { return func(o *commandOptions) { o.timeout = d } }

// WithStdin keeps the command's stdin open for SendStdin.
func WithStdin() CommandOption { return func(o *commandOptions) { o.stdin = true } }

// WithTag names the process, for Connect by tag.
func WithTag(tag string) CommandOption { return func(o *commandOptions) { o.tag = tag } }

// OnStdout streams stdout to fn as it arrives.
func OnStdout(fn func([]byte)) CommandOption { return func(o *commandOptions) { o.onStdout = fn } }

// OnStderr streams stderr to fn as it arrives.
func OnStderr(fn func([]byte)) CommandOption { return func(o *commandOptions) { o.onStderr = fn } }

func userHeader(h interface{ Set(string, string) }, user string) {
	if user != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
}

// Run runs cmd with bash and waits for it. A non-zero exit is a
// *CommandExitError holding the result.
func (c *Commands) Run(ctx context.Context, cmd string, opts ...CommandOption) (*CommandResult, error) {
	h, err := c.start(ctx, ctx, cmd, opts)
	if err != nil {
		return nil, err
	}
	return h.Wait(ctx)
}

// Start runs cmd with bash in the background and returns once it started.
// The handle streams its output until it ends; Wait collects the result.
func (c *Commands) Start(ctx context.Context, cmd string, opts ...CommandOption) (*CommandHandle, error) {
	return c.start(ctx, context.Background(), cmd, opts)
}

// start opens the stream under life (the command's own context) and waits
// for the start event under ctx.
func (c *Commands) start(ctx, life context.Context, cmd string, opts []CommandOption) (*CommandHandle, error) {
	var o commandOptions
	for _, opt := range opts {
		opt(&o)
	}
	req := connect.NewRequest(&pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}, Envs: o.envs},
		Stdin:   &o.stdin,
	})
	if o.cwd != "" {
		req.Msg.Process.Cwd = &o.cwd
	}
	if o.tag != "" {
		req.Msg.Tag = &o.tag
	}
	userHeader(req.Header(), o.user)
	req.Header().Set("Keepalive-Ping-Interval", "50")
	streamCtx, cancel := context.WithCancel(life)
	if o.timeout > 0 {
		streamCtx, cancel = context.WithTimeout(life, o.timeout)
	}
	stream, err := c.rpc.Start(streamCtx, req)
	if err != nil {
		cancel()
		return nil, rpcError("start command", err)
	}
	return newHandle(ctx, c, stream, cancel, o)
}

// Connect attaches to a running process: its new output and its end.
func (c *Commands) Connect(ctx context.Context, pid uint32, opts ...CommandOption) (*CommandHandle, error) {
	var o commandOptions
	for _, opt := range opts {
		opt(&o)
	}
	streamCtx, cancel := context.WithCancel(context.Background())
	req := connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}})
	req.Header().Set("Keepalive-Ping-Interval", "50")
	stream, err := c.rpc.Connect(streamCtx, req)
	if err != nil {
		cancel()
		return nil, rpcError("connect to process", err)
	}
	return newHandle(ctx, c, stream, cancel, o)
}

// ProcessInfo is a running process.
type ProcessInfo struct {
	PID  uint32
	Tag  string
	Cmd  string
	Args []string
	Cwd  string
}

// List returns the sandbox's running processes.
func (c *Commands) List(ctx context.Context) ([]ProcessInfo, error) {
	resp, err := c.rpc.List(ctx, connect.NewRequest(&pb.ListRequest{}))
	if err != nil {
		return nil, rpcError("list processes", err)
	}
	var out []ProcessInfo
	for _, p := range resp.Msg.GetProcesses() {
		out = append(out, ProcessInfo{PID: p.GetPid(), Tag: p.GetTag(), Cmd: p.GetConfig().GetCmd(),
			Args: p.GetConfig().GetArgs(), Cwd: p.GetConfig().GetCwd()})
	}
	return out, nil
}

// Kill sends SIGKILL to a process; an unknown pid is ErrNotFound.
func (c *Commands) Kill(ctx context.Context, pid uint32) error {
	_, err := c.rpc.SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL}))
	return rpcError("kill process", err)
}

// SendStdin writes to a process's stdin (started WithStdin).
func (c *Commands) SendStdin(ctx context.Context, pid uint32, data []byte) error {
	_, err := c.rpc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}},
		Input:   &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: data}}}))
	return rpcError("send stdin", err)
}

// CloseStdin closes a process's stdin.
func (c *Commands) CloseStdin(ctx context.Context, pid uint32) error {
	_, err := c.rpc.CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}}))
	return rpcError("close stdin", err)
}

// eventStream is a Start or Connect stream.
type eventStream[T any] interface {
	Receive() bool
	Msg() *T
	Err() error
	Close() error
}

type withEvent interface{ GetEvent() *pb.ProcessEvent }

// CommandHandle is a started process.
type CommandHandle struct {
	PID uint32

	c      *Commands
	cancel context.CancelFunc
	o      commandOptions
	done   chan struct{}

	mu     sync.Mutex
	stdout strings.Builder
	stderr strings.Builder
	result *CommandResult
	err    error
}

func newHandle[T any, PT interface {
	*T
	withEvent
}](ctx context.Context, c *Commands, stream eventStream[T], cancel context.CancelFunc, o commandOptions) (*CommandHandle, error) {
	h := &CommandHandle{c: c, cancel: cancel, o: o, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer close(h.done)
		defer cancel()
		defer stream.Close()
		first := true
		for stream.Receive() {
			ev := PT(stream.Msg()).GetEvent()
			if s := ev.GetStart(); s != nil && first {
				h.PID, first = s.GetPid(), false
				started <- nil
				continue
			}
			h.event(ev)
		}
		err := rpcError("command stream", stream.Err())
		if err == nil && h.result == nil {
			err = fmt.Errorf("command stream ended without an end event")
		}
		if first {
			started <- err
		}
		h.mu.Lock()
		if h.result == nil {
			h.err = err
		}
		h.mu.Unlock()
	}()
	select {
	case err := <-started:
		if err != nil {
			return nil, err
		}
		return h, nil
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
}

func (h *CommandHandle) event(ev *pb.ProcessEvent) {
	if d := ev.GetData(); d != nil {
		h.mu.Lock()
		h.stdout.Write(d.GetStdout())
		h.stderr.Write(d.GetStderr())
		h.mu.Unlock()
		if b := d.GetStdout(); len(b) > 0 && h.o.onStdout != nil {
			h.o.onStdout(b)
		}
		if b := d.GetStderr(); len(b) > 0 && h.o.onStderr != nil {
			h.o.onStderr(b)
		}
		if b := d.GetPty(); len(b) > 0 && h.o.onPty != nil {
			h.o.onPty(b)
		}
	}
	if e := ev.GetEnd(); e != nil {
		h.mu.Lock()
		h.result = &CommandResult{Stdout: h.stdout.String(), Stderr: h.stderr.String(), ExitCode: int(e.GetExitCode()), Err: e.GetError()}
		h.mu.Unlock()
	}
}

// Wait waits for the process to end. A non-zero exit is a *CommandExitError.
func (h *CommandHandle) Wait(ctx context.Context) (*CommandResult, error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		h.cancel()
		return nil, fmt.Errorf("%w: %v", ErrTimeout, ctx.Err())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.result == nil {
		return nil, h.err
	}
	if h.result.ExitCode != 0 {
		return h.result, &CommandExitError{CommandResult: *h.result}
	}
	return h.result, nil
}

// Kill ends the process.
func (h *CommandHandle) Kill(ctx context.Context) error { return h.c.Kill(ctx, h.PID) }

// SendStdin writes to the process's stdin.
func (h *CommandHandle) SendStdin(ctx context.Context, data []byte) error {
	return h.c.SendStdin(ctx, h.PID, data)
}

// Disconnect stops following the process; it keeps running.
func (h *CommandHandle) Disconnect() { h.cancel() }

// CloseStdin closes the process's stdin (it reads end of file).
func (h *CommandHandle) CloseStdin(ctx context.Context) error { return h.c.CloseStdin(ctx, h.PID) }
