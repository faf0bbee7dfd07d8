package cove

import (
	"context"
	"io"
	"time"

	"connectrpc.com/connect"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

// PTY opens interactive terminals in a sandbox.
type PTY struct {
	s   *Sandbox
	rpc processconnect.ProcessClient
}

// PTYOptions describe a terminal; the shell is an interactive login bash
// unless Command is set.
type PTYOptions struct {
	Cols, Rows uint16
	// Command, when set, runs instead of the interactive shell (bash -l -c
	// Command); the terminal ends with it.
	Command string
	Envs    map[string]string
	Cwd     string
	User    string
	Timeout time.Duration // 0: the terminal lives until it exits or is killed
}

// Terminal is a running shell on a pseudo-terminal. Read returns its output;
// Write types into it.
type Terminal struct {
	*CommandHandle
	out *io.PipeReader
}

// Create starts a shell on a new terminal.
func (p *PTY) Create(ctx context.Context, opts PTYOptions) (*Terminal, error) {
	if opts.Cols == 0 || opts.Rows == 0 {
		opts.Cols, opts.Rows = 80, 24
	}
	envs := map[string]string{"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
	for k, v := range opts.Envs {
		envs[k] = v
	}
	args := []string{"-i", "-l"}
	if opts.Command != "" {
		args = []string{"-l", "-c", opts.Command}
	}
	req := connect.NewRequest(&pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: args, Envs: envs},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: uint32(opts.Cols), Rows: uint32(opts.Rows)}},
	})
	if opts.Cwd != "" {
		req.Msg.Process.Cwd = &opts.Cwd
	}
	userHeader(req.Header(), opts.User)
	req.Header().Set("Keepalive-Ping-Interval", "50")
	life, cancel := context.WithCancel(context.Background())
	if opts.Timeout > 0 {
		life, cancel = context.WithTimeout(context.Background(), opts.Timeout)
	}
	stream, err := p.rpc.Start(life, req)
	if err != nil {
		cancel()
		return nil, rpcError("start terminal", err)
	}
	pr, pw := io.Pipe()
	c := &Commands{s: p.s, rpc: p.rpc}
	h, err := newHandle(ctx, c, stream, cancel, commandOptions{onPty: func(b []byte) { _, _ = pw.Write(b) }})
	if err != nil {
		pw.Close()
		return nil, err
	}
	go func() {
		<-h.done
		pw.Close()
	}()
	return &Terminal{CommandHandle: h, out: pr}, nil
}

// Read reads the terminal's output; io.EOF once the shell ended.
func (t *Terminal) Read(b []byte) (int, error) { return t.out.Read(b) }

// Write sends keystrokes to the terminal.
func (t *Terminal) Write(b []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := t.c.rpc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: t.PID}},
		Input:   &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: b}}}))
	if err != nil {
		return 0, rpcError("write to terminal", err)
	}
	return len(b), nil
}

// Resize changes the terminal's size.
func (t *Terminal) Resize(ctx context.Context, cols, rows uint16) error {
	_, err := t.c.rpc.Update(ctx, connect.NewRequest(&pb.UpdateRequest{
		Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: t.PID}},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: uint32(cols), Rows: uint32(rows)}}}))
	return rpcError("resize terminal", err)
}
