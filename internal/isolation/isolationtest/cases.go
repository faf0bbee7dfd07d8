package isolationtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
)

func (s *suite) createAndReachAgent(t *testing.T) {
	t.Parallel()
	id, c := s.create(t, s.cfg.Spec(t))
	if err := c.Health(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("agent health: %v", err)
	}
	res := run(t, c, "echo hello; hostname; echo err >&2; exit 3")
	if got, want := string(res.Stdout), "hello\n"+id+"\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if string(res.Stderr) != "err\n" || res.ExitCode != 3 || res.Status != "exit status 3" {
		t.Errorf("stderr %q, exit %d, status %q; want err, 3, exit status 3", res.Stderr, res.ExitCode, res.Status)
	}
}

func (s *suite) destroyIdempotent(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	id := NewID()
	if _, err := s.d.Create(ctx, id, s.cfg.Spec(t)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.d.Destroy(ctx, id); err != nil {
			t.Fatalf("destroy #%d: %v", i+1, err)
		}
	}
	s.noLeaks(t, id)
	if err := s.d.Destroy(ctx, NewID()); err != nil {
		t.Errorf("destroy of a sandbox that never existed: %v", err)
	}
	if _, err := s.d.Dial(ctx, id, 49983); err == nil {
		t.Error("dial of a destroyed sandbox succeeded")
	}
}

func (s *suite) badInput(t *testing.T) {
	t.Parallel()
	good := s.cfg.Spec(t)
	tests := []struct {
		name string
		id   string
		edit func(*isolation.Spec)
	}{
		{"id with a slash", "../etc", nil},
		{"upper-case id", "ABC", nil},
		{"empty id", "", nil},
		{"memory too small", NewID(), func(sp *isolation.Spec) { sp.Limits.MemoryMB = 1 }},
		{"cpu zero", NewID(), func(sp *isolation.Spec) { sp.Limits.CPUMillis = 0 }},
		{"pids too many", NewID(), func(sp *isolation.Spec) { sp.Limits.PIDs = 1 << 30 }},
		{"disk zero", NewID(), func(sp *isolation.Spec) { sp.Limits.DiskMB = 0 }},
		{"missing layer", NewID(), func(sp *isolation.Spec) { sp.RootFS.Layers = []string{"/nonexistent/layer"} }},
		{"no layer", NewID(), func(sp *isolation.Spec) { sp.RootFS.Layers = nil }},
		{"relative bind", NewID(), func(sp *isolation.Spec) {
			sp.RootFS.Binds = append(sp.RootFS.Binds, isolation.Bind{Source: "usr", Target: "/x"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := good
			spec.RootFS.Layers = append([]string(nil), good.RootFS.Layers...)
			spec.RootFS.Binds = append([]isolation.Bind(nil), good.RootFS.Binds...)
			if tc.edit != nil {
				tc.edit(&spec)
			}
			_, err := s.d.Create(ctxFor(t, time.Minute), tc.id, spec)
			if !errs.Is(err, errs.InvalidArgument) {
				t.Fatalf("create: %v, want an invalid-argument error", err)
			}
			if isolation.ValidateID(tc.id) == nil {
				s.noLeaks(t, tc.id)
			}
		})
	}
}

func (s *suite) duplicateID(t *testing.T) {
	t.Parallel()
	id, c := s.create(t, s.cfg.Spec(t))
	_, err := s.d.Create(ctxFor(t, time.Minute), id, s.cfg.Spec(t))
	if !errs.Is(err, errs.AlreadyExists) {
		t.Fatalf("second create of %s: %v, want already-exists", id, err)
	}
	if res := run(t, c, "echo still here"); string(res.Stdout) != "still here\n" {
		t.Errorf("the first sandbox broke: %q", res.Stdout)
	}
}

func (s *suite) cancelledCreate(t *testing.T) {
	t.Parallel()
	for _, after := range []time.Duration{0, 100 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		if after == 0 {
			cancel()
		} else {
			time.AfterFunc(after, cancel)
		}
		id := NewID()
		_, err := s.d.Create(ctx, id, s.cfg.Spec(t))
		cancel()
		if err == nil { // finished before the cancel: it must still destroy cleanly
			if err := s.d.Destroy(context.Background(), id); err != nil {
				t.Fatalf("destroy: %v", err)
			}
		} else if after == 0 && !errors.Is(err, context.Canceled) {
			t.Errorf("create with a cancelled context: %v, want context.Canceled", err)
		}
		s.noLeaks(t, id)
	}
}

func (s *suite) memoryLimit(t *testing.T) {
	t.Parallel()
	spec := s.cfg.Spec(t)
	spec.Limits.MemoryMB = 128
	id, c := s.create(t, spec)
	const alloc = `python3 -c 'b = bytearray(512 << 20); print("allocated")'`
	ctx := ctxFor(t, time.Minute)
	res, err := c.Run(ctx, "root", alloc, 0)
	if err == nil && (res.ExitCode == 0 || strings.Contains(string(res.Stdout), "allocated")) {
		t.Fatalf("512 MiB allocation under a 128 MiB limit: exit %d, stdout %q", res.ExitCode, res.Stdout)
	}
	if alive, aerr := c.Run(ctx, "root", "echo alive", 0); aerr == nil && string(alive.Stdout) == "alive\n" {
		// The process alone was killed: its end says why (the agent reads
		// the sandbox's OOM counter, on every driver).
		if err != nil {
			t.Errorf("the allocation's stream broke (%v), yet the sandbox lives", err)
		} else if !strings.Contains(res.Error, "out of memory") {
			t.Errorf("end reason %q does not say out of memory (status %q)", res.Error, res.Status)
		}
		return
	}
	if s.d.Capabilities().ContainsProcesses {
		t.Fatalf("the sandbox did not survive its process's OOM kill (%v)", err)
	}
	// A driver that cannot always contain it: the sandbox ended, reported
	// as out of memory.
	exit, werr := s.d.Wait(ctx, id)
	if werr != nil {
		t.Fatalf("the sandbox neither answers nor ended: %v", werr)
	}
	if exit.Reason != isolation.ExitOOM {
		t.Errorf("exit reason %q (%s), want %q", exit.Reason, exit.Detail, isolation.ExitOOM)
	}
}

func (s *suite) pidsLimit(t *testing.T) {
	t.Parallel()
	spec := s.cfg.Spec(t)
	spec.Limits.PIDs = 64
	id, c := s.create(t, spec)
	// Fork until the kernel refuses, count what ran, clean up.
	const bomb = `python3 -c '
import os, signal, time
kids = []
try:
    for _ in range(500):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
except OSError:
    pass
print(len([p for p in os.listdir("/proc") if p.isdigit()]))
for k in kids:
    os.kill(k, signal.SIGKILL)
'`
	if !s.d.Capabilities().ContainsProcesses {
		s.sandboxEnds(t, id, c, bomb, "")
		return
	}
	res := run(t, c, bomb)
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("count processes: %q %q", res.Stdout, res.Stderr)
	}
	if n > 64 {
		t.Errorf("%d processes run under a limit of 64", n)
	}
	if n < 32 {
		t.Errorf("only %d processes ran; the limit is 64", n)
	}
	// The bomb's processes are killed; once they are gone (the agent reaps
	// them) the sandbox takes commands again.
	var out string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := c.Run(ctxFor(t, time.Minute), "root", "echo alive", 0)
		if err == nil && string(res.Stdout) == "alive\n" {
			return
		}
		out = fmt.Sprintf("%q %v", res.Stdout, err)
		if time.Now().After(deadline) {
			break
		}
	}
	t.Errorf("sandbox did not recover from the fork bomb: %s", out)
}

// cpuLimit runs alone (not parallel): other sandboxes of the suite would
// take the CPU its quota promises.
func (s *suite) cpuLimit(t *testing.T) {
	st, ok := s.d.(isolation.Stater)
	if !ok {
		t.Skip("driver reports no stats")
	}
	spec := s.cfg.Spec(t)
	spec.Limits.CPUMillis = 500
	id, c := s.create(t, spec)
	ctx := ctxFor(t, time.Minute)
	before, err := st.Stats(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	run(t, c, "timeout 3 sh -c 'while :; do :; done' & timeout 3 sh -c 'while :; do :; done'; wait")
	wall := time.Since(start)
	after, err := st.Stats(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	used := after.CPUUsage - before.CPUUsage
	share := float64(used) / float64(wall) // cores used on average
	t.Logf("used %v of CPU in %v: %.2f cores under a 0.5 core quota", used, wall, share)
	if share < 0.4 || share > 0.6 {
		t.Errorf("CPU use %.2f cores is not within 20%% of the 0.5 core quota", share)
	}
}

func (s *suite) diskLimit(t *testing.T) {
	t.Parallel()
	spec := s.cfg.Spec(t)
	spec.Limits.DiskMB = 32
	spec.Limits.MemoryMB = 256
	_, c := s.create(t, spec)
	res := run(t, c, "dd if=/dev/zero of=/home/user/big bs=1M count=64 2>&1; echo rc=$?")
	if !strings.Contains(string(res.Stdout), "No space left") || strings.Contains(string(res.Stdout), "rc=0") {
		t.Fatalf("a 64 MiB write on a 32 MiB disk: %s", res.Stdout)
	}
	if res := run(t, c, "rm /home/user/big && echo freed > /home/user/f && cat /home/user/f"); string(res.Stdout) != "freed\n" {
		t.Errorf("disk did not recover after the file was removed: %q %q", res.Stdout, res.Stderr)
	}
}

func (s *suite) agentDeath(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	id, h, c := s.createHandle(t, s.cfg.Spec(t))
	if !s.d.Capabilities().ContainsProcesses {
		// Its agent may be signalled from inside: that ends the sandbox,
		// and the end is reported.
		s.sandboxEnds(t, id, c, "kill -9 1; sleep 5", isolation.ExitCrashed)
		return
	}
	// The sandbox's init ignores signals sent from inside, even by its root.
	run(t, c, "kill -9 1; true")
	if err := c.Health(ctx); err != nil {
		t.Fatalf("the agent died from a signal sent inside the sandbox: %v", err)
	}
	// Killed from the host, its end is reported.
	if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exit, err := s.d.Wait(ctx, id)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if exit.Reason != isolation.ExitCrashed {
		t.Errorf("exit reason %q, want %q", exit.Reason, isolation.ExitCrashed)
	}
}

func (s *suite) recoverAfterRestart(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	id := NewID()
	h, err := s.d.Create(ctx, id, s.cfg.Spec(t))
	if err != nil {
		t.Fatal(err)
	}
	restarted := s.cfg.New(t)
	if err := restarted.Recover(ctx, h); err != nil {
		t.Fatalf("recover: %v", err)
	}
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return restarted.Dial(ctx, id, 49983) })
	defer c.Close()
	if res := run(t, c, "echo adopted"); string(res.Stdout) != "adopted\n" {
		t.Errorf("adopted sandbox answered %q", res.Stdout)
	}
	if err := restarted.Destroy(ctx, id); err != nil {
		t.Fatalf("destroy through the restarted driver: %v", err)
	}
	exit, err := restarted.Wait(ctx, id)
	if err == nil && exit.Reason != isolation.ExitDestroyed {
		t.Errorf("exit reason %q, want destroyed", exit.Reason)
	}
	if err := s.d.Destroy(ctx, id); err != nil {
		t.Fatalf("destroy through the first driver: %v", err)
	}
	s.noLeaks(t, id)
	stale := h
	if err := restarted.Recover(ctx, stale); !errs.Is(err, errs.NotFound) {
		t.Errorf("recover of a destroyed sandbox: %v, want not found", err)
	}
}

func (s *suite) userNamespace(t *testing.T) {
	t.Parallel()
	spec := s.cfg.Spec(t)
	spec.UserNamespace = true
	ctx := ctxFor(t, time.Minute)
	_, h, c := s.createHandle(t, spec)
	res, err := c.Run(ctx, "user", "id -un; echo mine > ~/f && cat ~/f", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "user\nmine\n" {
		t.Errorf("user in a user namespace: %q %q", got, res.Stderr)
	}
	if res := run(t, c, "echo root > /etc/x && cat /etc/x && id -u"); string(res.Stdout) != "root\n0\n" {
		t.Errorf("the namespace's root cannot write its own /etc: %q %q", res.Stdout, res.Stderr)
	}
	// On the host, the sandbox's root is an unprivileged user.
	status, err := os.ReadFile("/proc/" + strconv.Itoa(h.PID) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == "0" {
			t.Errorf("the sandbox's init runs as host root: %s", line)
		}
	}
}

// sandboxEnds runs cmd, which must end the sandbox (on a driver without
// ContainsProcesses), and checks that the end is reported, with reason
// want when given, and that the host holds nothing more of it than of a
// live sandbox.
func (s *suite) sandboxEnds(t *testing.T, id string, c *agentclient.Client, cmd string, want isolation.ExitReason) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	if res, err := c.Run(ctx, "root", cmd, 0); err == nil && res.ExitCode == 0 {
		t.Fatalf("%s: exited 0 (%q); it must fail or end the sandbox", cmd, res.Stdout)
	}
	exit, err := s.d.Wait(ctx, id)
	if err != nil {
		t.Fatalf("the sandbox did not end after %s: %v", cmd, err)
	}
	if want != "" && exit.Reason != want {
		t.Errorf("exit reason %q (%s), want %q", exit.Reason, exit.Detail, want)
	}
}
