package envd_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// TestKillThenCheck: once SendSignal(SIGKILL) has answered, the process —
// a command or a terminal — is gone: a `kill -0` of its pid fails (a
// zombie would pass it) and List does not show it; with processes
// loading every CPU beside it.
func TestKillThenCheck(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	kill := func(pid uint32) error {
		_, err := a.proc.SendSignal(ctx(t), req(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}, Signal: pb.Signal_SIGNAL_SIGKILL}))
		return err
	}
	load := map[uint32]<-chan events{}
	for range 4 {
		pid, out := startBackground(t, a, req(sh("while :; do :; done")))
		load[pid] = out
	}
	defer func() {
		for pid, out := range load {
			if err := kill(pid); err != nil {
				t.Errorf("kill the load %d: %v", pid, err)
			}
			<-out
		}
	}()
	pty := &pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"--norc", "--noprofile", "-i"}},
		Pty:     &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}},
	}
	for i := range 40 {
		r := req(sh("sleep 60 & sleep 60"))
		if i%2 == 1 {
			r = req(pty)
		}
		pid, out := startBackground(t, a, r)
		if err := kill(pid); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
		if err := unix.Kill(int(pid), 0); !errors.Is(err, unix.ESRCH) {
			t.Fatalf("round %d: kill -0 %d right after its kill: %v, want ESRCH (the process is still there)", i, pid, err)
		}
		list, err := a.proc.List(ctx(t), req(&pb.ListRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Msg.GetProcesses() {
			if p.GetPid() == pid {
				t.Fatalf("round %d: List shows %d after its kill", i, pid)
			}
		}
		if ev := <-out; ev.end.GetStatus() != "signal: killed" {
			t.Errorf("round %d: end %v, want signal: killed", i, ev.end)
		}
	}
}
