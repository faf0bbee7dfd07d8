// Package isolationtest is the conformance suite every isolation driver
// passes: create, agent reachable, limits enforced, containment, destroy
// idempotent, bad input refused without a trace, a cancelled create leaks
// nothing, recover after the node restarts, and what a driver offers of
// the optional behaviours (a layer saved, a checkpoint restored, a
// running sandbox copied). Drivers
// run it from their own tests:
//
//	isolationtest.Run(t, isolationtest.Config{New: …, Spec: …, Leaks: …})
package isolationtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation"
)

// Config adapts the suite to a driver.
type Config struct {
	// New returns a driver over the host's state. Called a second time it
	// plays the node after a restart.
	New func(t *testing.T) isolation.Driver
	// Spec returns a valid spec for a small sandbox.
	Spec func(t *testing.T) isolation.Spec
	// Leaks lists what is left on the host of sandbox id (directories,
	// cgroups, processes …); empty when it is all gone.
	Leaks func(t *testing.T, id string) []string
}

// Run runs the suite.
func Run(t *testing.T, cfg Config) {
	d := cfg.New(t)
	s := &suite{cfg: cfg, d: d}
	t.Run("CreateAndReachAgent", s.createAndReachAgent)
	t.Run("DestroyIsIdempotent", s.destroyIdempotent)
	t.Run("BadInputLeavesNothing", s.badInput)
	t.Run("DuplicateID", s.duplicateID)
	t.Run("CancelledCreateLeaksNothing", s.cancelledCreate)
	t.Run("MemoryLimit", s.memoryLimit)
	t.Run("PIDsLimit", s.pidsLimit)
	t.Run("CPULimit", s.cpuLimit)
	t.Run("DiskLimit", s.diskLimit)
	t.Run("Containment", s.containment)
	t.Run("AgentDeathIsReported", s.agentDeath)
	t.Run("RecoverAfterRestart", s.recoverAfterRestart)
	t.Run("SaveLayer", s.saveLayer)
	t.Run("Checkpoint", s.checkpoint)
	t.Run("Clone", s.clone)
	t.Run("Volume", s.volume)
	if d.Capabilities().UserNamespaces {
		t.Run("UserNamespace", s.userNamespace)
	}
}

type suite struct {
	cfg Config
	d   isolation.Driver
}

// NewID returns a sandbox id unique to this run.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// create makes a sandbox that is destroyed (and checked for leaks) when the
// test ends.
func (s *suite) create(t *testing.T, spec isolation.Spec) (string, *agentclient.Client) {
	id, _, c := s.createHandle(t, spec)
	return id, c
}

// createHandle is create that also returns the sandbox's handle.
func (s *suite) createHandle(t *testing.T, spec isolation.Spec) (string, isolation.Handle, *agentclient.Client) {
	t.Helper()
	id := NewID()
	h, err := s.d.Create(ctxFor(t, time.Minute), id, spec)
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return id, h, s.own(t, id)
}

// own makes the test own sandbox id: its agent's client, and its destroy
// (checked for leaks) when the test ends.
func (s *suite) own(t *testing.T, id string) *agentclient.Client {
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return s.d.Dial(ctx, id, 49983) })
	t.Cleanup(func() {
		c.Close()
		if err := s.d.Destroy(context.Background(), id); err != nil {
			t.Errorf("destroy %s: %v", id, err)
		}
		s.noLeaks(t, id)
	})
	return c
}

func (s *suite) noLeaks(t *testing.T, id string) {
	t.Helper()
	if left := s.cfg.Leaks(t, id); len(left) > 0 {
		t.Errorf("sandbox %s left behind: %v", id, left)
	}
}

// run runs a shell command as root in the sandbox.
func run(t *testing.T, c *agentclient.Client, cmd string) agentclient.Result {
	t.Helper()
	res, err := c.Run(ctxFor(t, 2*time.Minute), "root", cmd, 0)
	if err != nil {
		t.Fatalf("run %q: %v", cmd, err)
	}
	return res
}
