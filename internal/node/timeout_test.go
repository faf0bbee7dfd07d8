package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// TestTimeoutOfNone: SetTimeout(0) ends a sandbox's time before it
// returns, as its timer would: one with auto-pause is paused (and resumes
// with its memory), any other is killed and leaves nothing; a paused one
// has no time to end.
func TestTimeoutOfNone(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	ctx := ctxT(t)
	paused, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, Settings: sandboxes.Settings{AutoPause: true}})
	if err != nil {
		t.Fatal(err)
	}
	killed, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := m.Agent(paused.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Run(ctx, "", "echo kept > /dev/shm/mark", 0); err != nil {
		t.Fatal(err)
	}

	if got, err := m.SetTimeout(ctx, paused.ID, 0); err != nil || got.State != node.StatePaused {
		t.Fatalf("timeout of 0 with auto-pause: %v %v, want paused", got.State, err)
	}
	if got, err := m.Get(ctx, paused.ID); err != nil || got.State != node.StatePaused {
		t.Errorf("then: %v %v, want paused", got.State, err)
	}
	if _, err := m.SetTimeout(ctx, paused.ID, 0); !errs.Is(err, errs.NotFound) {
		t.Errorf("timeout of 0 of a paused sandbox: %v, want not found", err)
	}
	if _, err := m.Resume(ctx, paused.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if agent, err = m.Agent(paused.ID); err != nil {
		t.Fatal(err)
	}
	if res, err := agent.Run(ctx, "", "cat /dev/shm/mark", 0); err != nil || string(res.Stdout) != "kept\n" {
		t.Errorf("after resume /dev/shm holds %q (%v), want its memory kept", res.Stdout, err)
	}

	if got, err := m.SetTimeout(ctx, killed.ID, -time.Second); err != nil || got.State != node.StateKilled {
		t.Fatalf("timeout below 0: %v %v, want killed", got.State, err)
	}
	if _, err := m.Get(context.Background(), killed.ID); !errs.Is(err, errs.NotFound) {
		t.Errorf("get after a timeout of 0: %v, want not found", err)
	}
	if err := m.Kill(ctx, paused.ID); err != nil {
		t.Fatal(err)
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
