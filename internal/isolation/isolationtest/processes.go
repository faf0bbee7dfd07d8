package isolationtest

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
)

// checkpoint saves a running sandbox whole and brings it back, on drivers
// that can (isolation.Checkpointer): a process goes on with its count
// from where it was, a file written before is there, and the end in
// between is reported as a checkpoint. A driver that cannot save this
// sandbox (a microVM guest sharing host directories) says Unimplemented.
func (s *suite) checkpoint(t *testing.T) {
	t.Parallel()
	cp, ok := s.d.(isolation.Checkpointer)
	if !ok {
		t.Skipf("the %s driver cannot checkpoint a sandbox", s.d.Name())
	}
	id, c := s.create(t, s.cfg.Spec(t))
	before := startCounting(t, c)
	count := func() int { t.Helper(); return readCount(t, c) }
	ctx := ctxFor(t, 2*time.Minute)
	image := t.TempDir()
	if err := cp.Checkpoint(ctx, id, image); errs.Is(err, errs.Unimplemented) {
		t.Skipf("the %s driver cannot checkpoint this sandbox: %v", s.d.Name(), err)
	} else if err != nil {
		t.Fatal(err)
	}
	if exit, err := s.d.Wait(ctx, id); err != nil || exit.Reason != isolation.ExitCheckpointed {
		t.Errorf("its end at the checkpoint: %+v %v", exit, err)
	}
	if _, err := cp.Restore(ctx, id, image, nil); err != nil {
		t.Fatal(err)
	}
	if res := run(t, c, "cat /tmp/file"); string(res.Stdout) != "kept\n" {
		t.Errorf("a file after the restore: %q", res.Stdout)
	}
	// The same process goes on (nothing else would count) from where it
	// was.
	if restored := count(); restored < before {
		t.Errorf("the count after the restore: %d, %d before the checkpoint", restored, before)
	}
	countsOn(t, c, "after the restore")
}

// clone copies a running sandbox whole into two new ones, as the node
// does for a fork (paused, its files saved, its processes imaged), on
// drivers that can (isolation.Cloner): each copy's counting process goes
// on from the source's count, each has the source's files and its own
// host name, and the source goes on.
func (s *suite) clone(t *testing.T) {
	t.Parallel()
	cl, ok := s.d.(isolation.Cloner)
	saver, ok2 := s.d.(isolation.LayerSaver)
	pauser, ok3 := s.d.(isolation.Pauser)
	if !ok || !ok2 || !ok3 {
		t.Skipf("the %s driver cannot copy a running sandbox", s.d.Name())
	}
	spec := s.cfg.Spec(t)
	id, c := s.create(t, spec)
	before := startCounting(t, c)
	ctx := ctxFor(t, 2*time.Minute)
	if err := pauser.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(t.TempDir(), "layer")
	err := saver.SaveLayer(ctx, id, layer)
	image := t.TempDir()
	if err == nil {
		err = cl.Image(ctx, id, image)
	}
	if rerr := pauser.Resume(context.WithoutCancel(ctx), id); rerr != nil {
		t.Fatalf("the source after its image: %v", rerr)
	}
	if errs.Is(err, errs.Unimplemented) {
		t.Skipf("the %s driver cannot copy this sandbox: %v", s.d.Name(), err)
	} else if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		child := NewID()
		cspec := spec
		cspec.RootFS.Layers = append(append([]string(nil), spec.RootFS.Layers...), layer)
		if _, err := cl.Clone(ctx, child, cspec, image); err != nil {
			t.Fatal(err)
		}
		cc := s.own(t, child)
		if n := readCount(t, cc); n < before {
			t.Errorf("a copy starts at %d, the source was at %d before its image", n, before)
		}
		countsOn(t, cc, "in a copy") // its process, carried over: nothing else counts
		if got, want := string(run(t, cc, "cat /tmp/file; hostname").Stdout), "kept\n"+child+"\n"; got != want {
			t.Errorf("a copy's file and host name: %q, want %q", got, want)
		}
	}
	countsOn(t, c, "in the source after its copies")
	if got := strings.TrimSpace(string(run(t, c, "hostname").Stdout)); got != id {
		t.Errorf("the source's host name: %q", got)
	}
}

// startCounting writes a file and starts a process that counts in its
// memory, writing each count to /tmp/count; it returns the count once
// it passed 2.
func startCounting(t *testing.T, c *agentclient.Client) int {
	t.Helper()
	run(t, c, "echo kept > /tmp/file; (setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done' >/dev/null 2>&1 &)")
	n := readCount(t, c)
	for deadline := time.Now().Add(30 * time.Second); n < 3; n = readCount(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("the counting process counts to %d in 30 s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// readCount reads the counting process's last count (0: none yet).
func readCount(t *testing.T, c *agentclient.Client) int {
	t.Helper()
	res := run(t, c, "cat /tmp/count 2>/dev/null || echo 0")
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("the count: %q", res.Stdout)
	}
	return n
}

// countsOn checks that the counting process runs: its count grows.
func countsOn(t *testing.T, c *agentclient.Client, where string) {
	t.Helper()
	from := readCount(t, c)
	for deadline := time.Now().Add(30 * time.Second); readCount(t, c) <= from; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the counting process stands still at %d %s", from, where)
		}
	}
}
