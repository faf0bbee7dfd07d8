package node_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/node"
)

// TestPauseOfAnUnresponsiveAgent stops a sandbox's agent (SIGSTOP to its
// init, which the agent is, from the host's pid namespace): a strict
// pause is refused to retry and the sandbox runs on; a plain one pauses
// it marked, and it then resumes only booted afresh over its files.
func TestPauseOfAnUnresponsiveAgent(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	ctx := ctxT(t)
	info, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill(context.Background(), info.ID)
	agent, err := m.Agent(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Run(ctx, "", "echo kept > /home/user/file", 0); err != nil {
		t.Fatal(err)
	}
	// A strict pause of a sandbox whose agent answers pauses it.
	if p, err := m.Pause(ctx, info.ID, true); err != nil || p.Rest.Unresponsive {
		t.Fatalf("strict pause of an answering sandbox: %+v %v", p.Rest, err)
	}
	if _, err := m.Resume(ctx, info.ID, time.Minute); err != nil {
		t.Fatal(err)
	}

	if err := syscall.Kill(info.Handle.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_, err = m.Pause(ctx, info.ID, true)
	if !errs.Is(err, errs.Unavailable) || errs.HintOf(err).Retry == nil || !*errs.HintOf(err).Retry {
		t.Fatalf("strict pause of a sandbox whose agent does not answer: %v (%+v), want unavailable, to retry", err, errs.HintOf(err))
	}
	if got, err := m.Get(ctx, info.ID); err != nil || got.State != node.StateRunning {
		t.Fatalf("after a refused strict pause: %s %v, want it running", got.State, err)
	}

	p, err := m.Pause(ctx, info.ID, false)
	if err != nil || p.State != node.StatePaused || !p.Rest.Unresponsive {
		t.Fatalf("pause of a sandbox whose agent does not answer: %s %+v %v, want paused and marked", p.State, p.Rest, err)
	}
	_, err = m.Resume(ctx, info.ID, time.Minute)
	if !errs.Is(err, errs.Conflict) || errs.HintOf(err).Code != errs.CodeGuestUnresponsive {
		t.Fatalf("resume with its memory: %v (%+v), want a conflict %s", err, errs.HintOf(err), errs.CodeGuestUnresponsive)
	}
	// Booted afresh over its files (the control plane's reboot: files
	// saved, then resumed), its agent answers and its files are there.
	if p, err := m.PauseFiles(ctx, info.ID); err != nil || p.Rest.Unresponsive {
		t.Fatalf("pause as files: %+v %v", p.Rest, err)
	}
	if _, err := m.Resume(ctx, info.ID, time.Minute); err != nil {
		t.Fatalf("reboot of a sandbox paused unresponsive: %v", err)
	}
	agent, err = m.Agent(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := agent.Run(ctx, "", "cat /home/user/file", 0)
	if err != nil || string(res.Stdout) != "kept\n" {
		t.Fatalf("after the reboot: %q %v", res.Stdout, err)
	}
}
