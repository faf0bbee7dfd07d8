package isolationtest

import (
	"strconv"
	"strings"
	"testing"
	"time"

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
	run(t, c, "echo kept > /tmp/file; (setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done' >/dev/null 2>&1 &)")
	count := func() int {
		t.Helper()
		res := run(t, c, "cat /tmp/count 2>/dev/null || echo 0")
		n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		if err != nil {
			t.Fatalf("the count: %q", res.Stdout)
		}
		return n
	}
	before := count()
	for deadline := time.Now().Add(30 * time.Second); before < 3; before = count() {
		if time.Now().After(deadline) {
			t.Fatalf("the counting process counts to %d in 30 s", before)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	restored := count()
	if restored < before {
		t.Errorf("the count after the restore: %d, %d before the checkpoint", restored, before)
	}
	for deadline := time.Now().Add(30 * time.Second); count() <= restored; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the counting process stands still at %d after the restore", restored)
		}
	}
}
