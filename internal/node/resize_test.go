package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/node"
)

// TestResize gives a paused sandbox another size (E2B's onResume sizes):
// refused while it runs, past its template's size, past its team's quota
// (its old size not counted) and under the memory its processes hold,
// each leaving it paused as it was, its processes alive; else its cgroup
// takes the size in place, and it resumes with it.
func TestResize(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	m := h.manager(t)
	defer m.Close()
	ctx := ctxT(t)
	quota := &node.TeamQuota{MemoryMB: 384}
	create := func() node.Info {
		t.Helper()
		info, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, Team: "t", Quota: quota,
			Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 128}, Sized: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Kill(context.Background(), info.ID) })
		return info
	}
	a, _ := create(), create()
	agent, err := m.Agent(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 90 MiB held by a process that waits.
	if _, err := agent.Run(ctx, "", `python3 -c 'import time; x = b"a" * (90 << 20); time.sleep(600)' >/dev/null 2>&1 &`, 0); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, m, a.ID, 90<<20)
	if _, err := m.Resize(ctx, a.ID, isolation.Limits{MemoryMB: 256}, quota); !errs.Is(err, errs.Conflict) {
		t.Errorf("resize of a running sandbox: %v, want a conflict", err)
	}
	if _, err := m.Pause(ctx, a.ID, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size    isolation.Limits
		quota   node.TeamQuota
		kind    errs.Kind
		refused string
	}{
		{isolation.Limits{MemoryMB: 512}, *quota, errs.InvalidArgument, "memoryMB 512: template base allows at most 256 (its maxMemoryMB)"},
		{isolation.Limits{CPUMillis: 2000}, *quota, errs.InvalidArgument, "cpuCount 2: template base allows at most 1 (its maxCpuCount)"},
		{isolation.Limits{MemoryMB: 256}, node.TeamQuota{MemoryMB: 320}, errs.QuotaExceeded, "memory"},
		{isolation.Limits{MemoryMB: 64}, *quota, errs.InvalidArgument, "memoryMB 64: sandbox " + a.ID + " holds more memory than that"},
	} {
		_, err := m.Resize(ctx, a.ID, c.size, &c.quota)
		if !errs.Is(err, c.kind) || !strings.Contains(err.Error(), c.refused) {
			t.Errorf("resize to %+v under %+v: %v, want %q", c.size, c.quota, err, c.refused)
		}
		if got, err := m.Get(ctx, a.ID); err != nil || got.State != node.StatePaused || got.Limits.MemoryMB != 128 || got.Limits.CPUMillis != 1000 {
			t.Errorf("after a refused resize to %+v: %s %+v %v, want paused as it was", c.size, got.State, got.Limits, err)
		}
	}
	// 256 MiB and 128 MiB fill the quota of 384: its old 128 is not counted.
	got, err := m.Resize(ctx, a.ID, isolation.Limits{MemoryMB: 256}, quota)
	if err != nil || got.Limits.MemoryMB != 256 || got.Limits.CPUMillis != 1000 || got.State != node.StatePaused {
		t.Fatalf("resize to 256 MiB: %+v %s %v", got.Limits, got.State, err)
	}
	if _, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, Team: "t", Quota: quota,
		Limits: isolation.Limits{MemoryMB: 128}, Sized: true}); !errs.Is(err, errs.QuotaExceeded) {
		t.Errorf("a create past the quota the resize filled: %v", err)
	}
	if _, err := m.Resume(ctx, a.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if st, err := m.Stats(ctx, a.ID); err != nil || st.MemoryLimit != 256<<20 {
		t.Errorf("stats after the resume: %+v %v, want a limit of 256 MiB", st, err)
	}
	if res, err := agent.Run(ctx, "", `pgrep -c python3`, 0); err != nil || strings.TrimSpace(string(res.Stdout)) != "1" {
		t.Errorf("the process holding 90 MiB after the resizes: %q %v, want it running", res.Stdout, err)
	}
}

// waitHeld waits until sandbox id's cgroup holds at least n bytes.
func waitHeld(t *testing.T, m *node.Manager, id string, n uint64) {
	t.Helper()
	for range 600 {
		if st, err := m.Stats(context.Background(), id); err == nil && st.MemoryUsage >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sandbox %s never held %d bytes", id, n)
}
