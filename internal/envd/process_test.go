package envd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/testutil/testkit"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

func TestStartStreamsStartDataEnd(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	tests := []struct {
		name           string
		cmd            string
		stdout, stderr string
		exit           int32
		status, errMsg string
	}{
		{"success", "echo hello; echo oops >&2", "hello\n", "oops\n", 0, "exit status 0", ""},
		{"failure", "exit 3", "", "", 3, "exit status 3", "exit status 3"},
		{"killed", "kill -9 $$", "", "", -1, "signal: killed", "signal: killed"},
		{"sandbox env", "echo $E2B_SANDBOX_ID $E2B_SANDBOX", "itest true\n", "", 0, "exit status 0", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := a.start(t, req(sh(tc.cmd)))
			if ev.kinds[0] != "start" || ev.kinds[len(ev.kinds)-1] != "end" || ev.start == 0 {
				t.Fatalf("events %v (pid %d): want start first and end last", ev.kinds, ev.start)
			}
			if ev.stdout.String() != tc.stdout || ev.stderr.String() != tc.stderr {
				t.Errorf("stdout %q stderr %q, want %q %q", ev.stdout.String(), ev.stderr.String(), tc.stdout, tc.stderr)
			}
			if ev.end.GetExitCode() != tc.exit || ev.end.GetStatus() != tc.status || ev.end.GetError() != tc.errMsg {
				t.Errorf("end %v, want exit %d status %q error %q", ev.end, tc.exit, tc.status, tc.errMsg)
			}
		})
	}
}

func TestStartEnvironmentAndUser(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	if resp := a.post(t, "/init", `{"envVars":{"GLOBAL":"g","OVER":"global"}}`); resp.StatusCode != 204 {
		t.Fatalf("init: %s", resp.Status)
	}
	r := sh("echo $USER $HOME $GLOBAL $OVER $(id -un) $PWD")
	r.Process.Envs = map[string]string{"OVER": "request"}
	cwd := "/tmp"
	r.Process.Cwd = &cwd
	ev := a.start(t, req(r, "Authorization", basic("nobody")))
	if got, want := ev.stdout.String(), "nobody /nonexistent g request nobody /tmp\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	missing := "/does/not/exist"
	tests := []struct {
		name   string
		r      *connect.Request[pb.StartRequest]
		code   connect.Code
		substr string
	}{
		{"missing cwd", req(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "true", Cwd: &missing}}), connect.CodeInvalidArgument, "cwd '/does/not/exist' does not exist"},
		{"unknown user", req(sh("true"), "Authorization", basic("nosuchuser")), connect.CodeUnauthenticated, "invalid username"},
		{"unknown command", req(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "no-such-command-xyz"}}), connect.CodeInvalidArgument, "not found"},
		{"empty command", req(&pb.StartRequest{Process: &pb.ProcessConfig{}}), connect.CodeInvalidArgument, "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := a.proc.Start(ctx(t), tc.r)
			if err == nil {
				for s.Receive() {
				}
				err = s.Err()
			}
			if code(err) != tc.code || !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("err %v, want code %v containing %q", err, tc.code, tc.substr)
			}
		})
	}
}

func TestUnknownProcessIsNotFound(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: 999999}}
	tag := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "nope"}}
	calls := map[string]func() error{
		"SendSignal": func() error {
			_, err := a.proc.SendSignal(ctx(t), req(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL}))
			return err
		},
		"SendInput": func() error {
			_, err := a.proc.SendInput(ctx(t), req(&pb.SendInputRequest{Process: tag, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("x")}}}))
			return err
		},
		"CloseStdin": func() error {
			_, err := a.proc.CloseStdin(ctx(t), req(&pb.CloseStdinRequest{Process: sel}))
			return err
		},
		"Update": func() error {
			_, err := a.proc.Update(ctx(t), req(&pb.UpdateRequest{Process: sel}))
			return err
		},
		"Connect": func() error {
			s, err := a.proc.Connect(ctx(t), req(&pb.ConnectRequest{Process: sel}))
			if err != nil {
				return err
			}
			for s.Receive() {
			}
			return s.Err()
		},
	}
	for name, call := range calls {
		if err := call(); code(err) != connect.CodeNotFound {
			t.Errorf("%s: %v, want not_found", name, err)
		}
	}
}

// startBackground starts cmd and returns its pid once the start event came;
// the rest of the stream is collected in the background.
func startBackground(t *testing.T, a *agent, r *connect.Request[pb.StartRequest]) (uint32, <-chan events) {
	t.Helper()
	s, err := a.proc.Start(ctx(t), r)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() || s.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("first event is not start: %v %v", s.Msg(), s.Err())
	}
	pid := s.Msg().GetEvent().GetStart().GetPid()
	out := make(chan events, 1)
	go func() { out <- collect(t, s, func() *pb.ProcessEvent { return s.Msg().GetEvent() }) }()
	return pid, out
}

func TestStdinInputAndClose(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	on := true
	r := sh("cat")
	r.Stdin = &on
	pid, out := startBackground(t, a, req(r))
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := a.proc.SendInput(ctx(t), req(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("piped\n")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.proc.SendInput(ctx(t), req(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte("x")}}})); code(err) != connect.CodeInvalidArgument {
		t.Errorf("pty input to a pipe process: %v, want invalid_argument", err)
	}
	if _, err := a.proc.CloseStdin(ctx(t), req(&pb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	ev := <-out
	if ev.stdout.String() != "piped\n" || ev.end.GetExitCode() != 0 {
		t.Errorf("stdout %q end %v", ev.stdout.String(), ev.end)
	}
}

func TestPTY(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	r := &pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"--norc", "--noprofile", "-i"}, Envs: map[string]string{"TERM": "xterm"}},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}},
	}
	pid, out := startBackground(t, a, req(r))
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := a.proc.Update(ctx(t), req(&pb.UpdateRequest{Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 123, Rows: 45}}})); err != nil {
		t.Fatalf("resize: %v", err)
	}
	if _, err := a.proc.CloseStdin(ctx(t), req(&pb.CloseStdinRequest{Process: sel})); code(err) != connect.CodeInvalidArgument {
		t.Errorf("CloseStdin on a pty: %v, want invalid_argument", err)
	}
	input := "stty size; echo pty-$((6*7)); exit 5\n"
	if _, err := a.proc.SendInput(ctx(t), req(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte(input)}}})); err != nil {
		t.Fatal(err)
	}
	ev := <-out
	if !strings.Contains(ev.pty.String(), "45 123") || !strings.Contains(ev.pty.String(), "pty-42") {
		t.Errorf("pty output %q lacks the size and the command's output", ev.pty.String())
	}
	if ev.end.GetExitCode() != 5 {
		t.Errorf("end %v, want exit 5", ev.end)
	}
}

func TestConnectListSignalTag(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	tag := "server"
	r := sh("echo first; read line; echo $line; sleep 60")
	on := true
	r.Stdin = &on
	r.Tag = &tag
	st, err := a.proc.Start(ctx(t), req(r))
	if err != nil {
		t.Fatal(err)
	}
	var pid uint32
	for pid == 0 || !strings.Contains(string(st.Msg().GetEvent().GetData().GetStdout()), "first") {
		if !st.Receive() {
			t.Fatalf("stream ended early: %v", st.Err())
		}
		if s := st.Msg().GetEvent().GetStart(); s != nil {
			pid = s.GetPid()
		}
	}
	out := make(chan events, 1)
	go func() { out <- collect(t, st, func() *pb.ProcessEvent { return st.Msg().GetEvent() }) }()
	list, err := a.proc.List(ctx(t), req(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Msg.GetProcesses() {
		found = found || (p.GetPid() == pid && p.GetTag() == tag && p.GetConfig().GetCmd() == "/bin/bash")
	}
	if !found {
		t.Fatalf("List %v lacks pid %d with tag %q", list.Msg, pid, tag)
	}
	cs, err := a.proc.Connect(ctx(t), req(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: tag}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Receive() || cs.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("Connect's first event is not start{%d}: %v %v", pid, cs.Msg(), cs.Err())
	}
	// Once connected, new output reaches the new stream too; old output does not.
	if _, err := a.proc.SendInput(ctx(t), req(&pb.SendInputRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: tag}}, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("second\n")}}})); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	for !strings.Contains(seen.String(), "second") {
		if !cs.Receive() {
			t.Fatalf("Connect stream ended early: %v", cs.Err())
		}
		seen.Write(cs.Msg().GetEvent().GetData().GetStdout())
	}
	if strings.Contains(seen.String(), "first") {
		t.Errorf("Connect replayed old output: %q", seen.String())
	}
	if _, err := a.proc.SendSignal(ctx(t), req(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	ev, cev := <-out, collect(t, cs, func() *pb.ProcessEvent { return cs.Msg().GetEvent() })
	if ev.end.GetStatus() != "signal: killed" || cev.end.GetStatus() != "signal: killed" {
		t.Errorf("ends %v / %v, want signal: killed", ev.end, cev.end)
	}
	// An ended process replays its end for a while.
	cs2, err := a.proc.Connect(ctx(t), req(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}}))
	if err != nil {
		t.Fatal(err)
	}
	replay := collect(t, cs2, func() *pb.ProcessEvent { return cs2.Msg().GetEvent() })
	if strings.Join(replay.kinds, ",") != "start,end" {
		t.Errorf("replay of an ended process: %v, want start,end", replay.kinds)
	}
	if _, err := a.proc.SendSignal(ctx(t), req(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGTERM})); code(err) != connect.CodeNotFound {
		t.Errorf("signal to an ended process: %v, want not_found", err)
	}
}

func TestTimeoutBoundsProcessAndKeepalive(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	r := req(sh("sleep 2.5"), "Keepalive-Ping-Interval", "1")
	ev := a.start(t, r)
	keepalives := strings.Count(strings.Join(ev.kinds, ","), "keepalive")
	if keepalives < 1 {
		t.Errorf("no keepalive in 2.5 s of silence with a 1 s interval: %v", ev.kinds)
	}
	// A 300 ms deadline (sent as Connect-Timeout-Ms) kills a 60 s sleep.
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := a.proc.Start(short, req(sh("sleep 60")))
	if err != nil {
		t.Fatal(err)
	}
	for s.Receive() {
	}
	if code(s.Err()) != connect.CodeDeadlineExceeded {
		t.Errorf("stream error %v, want deadline_exceeded", s.Err())
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the deadline did not end the stream")
	}
	list, err := a.proc.List(ctx(t), req(&pb.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Wait(5*time.Second, func() bool {
		if len(list.Msg.GetProcesses()) == 0 {
			return true
		}
		if l, err := a.proc.List(ctx(t), req(&pb.ListRequest{})); err == nil {
			list = l
		}
		return false
	})
	if n := len(list.Msg.GetProcesses()); n != 0 {
		t.Errorf("%d processes still run after their deadline", n)
	}
}

func TestStreamInput(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	on := true
	r := sh("cat")
	r.Stdin = &on
	pid, out := startBackground(t, a, req(r))
	s := a.proc.StreamInput(ctx(t))
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	msgs := []*pb.StreamInputRequest{
		{Event: &pb.StreamInputRequest_Start{Start: &pb.StreamInputRequest_StartEvent{Process: sel}}},
		{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("one ")}}}}},
		{Event: &pb.StreamInputRequest_Data{Data: &pb.StreamInputRequest_DataEvent{Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("two\n")}}}}},
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.proc.CloseStdin(ctx(t), req(&pb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	if ev := <-out; ev.stdout.String() != "one two\n" {
		t.Errorf("stdout %q, want %q", ev.stdout.String(), "one two\n")
	}
}

func TestBackgroundChildKeepsOutputOpen(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	// The shell ends at once; its background child holds stdout for 30 s.
	start := time.Now()
	ev := a.start(t, req(sh("echo before; sleep 30 & echo after")))
	if ev.stdout.String() != "before\nafter\n" || ev.end.GetExitCode() != 0 {
		t.Errorf("stdout %q end %v", ev.stdout.String(), ev.end)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the end waited for the background child")
	}
}
