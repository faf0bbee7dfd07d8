package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"

	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// dirs are the group's directories in every hierarchy it joined.
func (g *Group) dirs(t *testing.T) []string {
	switch i := g.impl.(type) {
	case *v2:
		return []string{i.path}
	case *v1:
		subs, err := v1Mounts()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range subs {
			out = append(out, i.dir(s.Name()))
		}
		return out
	}
	t.Fatalf("unknown cgroup implementation %T", g.impl)
	return nil
}

// pidsDir is the directory processes are listed from.
func (g *Group) pidsDir() string {
	if i, ok := g.impl.(*v1); ok {
		return i.dir(cgroup1.Pids)
	}
	return g.impl.(*v2).path
}

func TestDestroy(t *testing.T) {
	testkit.NeedRoot(t, "")
	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprintf("nested=%v", nested), func(t *testing.T) {
			name := fmt.Sprintf("cove-test-%d/sb", time.Now().UnixNano())
			t.Cleanup(func() { RemoveEmpty(filepath.Dir(name)) })
			g, err := New(name, Limits{CPUMillis: 500, MemoryBytes: 64 << 20, PIDs: 32})
			if err != nil {
				t.Fatal(err)
			}
			var cmds []*exec.Cmd
			var exited []chan struct{}
			start := func(dir string) {
				c := exec.Command("sleep", "300")
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Process.Kill() })
				cmds = append(cmds, c)
				done := make(chan struct{})
				exited = append(exited, done)
				go func() { c.Wait(); close(done) }()
				if dir == "" {
					if err := g.Add(c.Process.Pid); err != nil {
						t.Fatal(err)
					}
					return
				}
				if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(c.Process.Pid)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			start("")
			if nested {
				// A group below the sandbox's, in every hierarchy, with a
				// process in the one processes are listed from.
				for _, d := range g.dirs(t) {
					if err := os.Mkdir(filepath.Join(d, "child"), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				start(filepath.Join(g.pidsDir(), "child"))
			}
			pids, err := g.Procs()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(pids)
			var want []int
			for _, c := range cmds {
				want = append(want, c.Process.Pid)
			}
			slices.Sort(want)
			if !slices.Equal(pids, want) {
				t.Fatalf("Procs = %v, want %v", pids, want)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := g.Destroy(ctx); err != nil {
				t.Fatal(err)
			}
			for i, done := range exited {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Errorf("process %d survived Destroy", cmds[i].Process.Pid)
				}
			}
			for _, d := range g.dirs(t) {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left after Destroy (%v)", d, err)
				}
			}
			if err := g.Destroy(ctx); err != nil {
				t.Errorf("second Destroy: %v", err)
			}
		})
	}
}

// TestStats: what a group's Stats reads is what its files say: its
// processes, its memory limit, the memory and CPU its process used.
func TestStats(t *testing.T) {
	testkit.NeedRoot(t, "")
	name := fmt.Sprintf("cove-test-%d/stats", time.Now().UnixNano())
	t.Cleanup(func() { RemoveEmpty(filepath.Dir(name)) })
	g, err := New(name, Limits{CPUMillis: 1000, MemoryBytes: 64 << 20, PIDs: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy(context.Background())
	// A shell that, once in the group, spins a while and fills 8 MiB of
	// memory it holds on to (a variable), then waits.
	runIn(t, g, `read; x=$(head -c 8000000 /dev/zero | tr '\0' a); i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 300 & echo done; wait`)
	s, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.PIDs != 2 { // bash and its sleep
		t.Errorf("%d processes, want 2", s.PIDs)
	}
	if s.MemoryLimit != 64<<20 {
		t.Errorf("memory limit %d, want %d", s.MemoryLimit, 64<<20)
	}
	if s.MemoryUsage < 8_000_000 || s.MemoryUsage > 64<<20 {
		t.Errorf("memory usage %d: the shell holds 8 MB", s.MemoryUsage)
	}
	if s.CPUUsage <= 0 {
		t.Errorf("CPU usage %v", s.CPUUsage)
	}
	if s.OOMKills != 0 {
		t.Errorf("%d OOM kills", s.OOMKills)
	}
}

// TestUpdate resizes a group holding a process: its CPU and memory limits
// grow and shrink, its pids limit stays, and memory below what the
// process holds is refused.
func TestUpdate(t *testing.T) {
	t.Parallel()
	testkit.NeedRoot(t, "")
	name := fmt.Sprintf("cove-test-%d/update", time.Now().UnixNano())
	t.Cleanup(func() { RemoveEmpty(filepath.Dir(name)) })
	g, err := New(name, Limits{CPUMillis: 1000, MemoryBytes: 64 << 20, PIDs: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy(context.Background())
	// A shell that, once in the group, holds 24 MB of memory and waits.
	runIn(t, g, `read; x=$(head -c 24000000 /dev/zero | tr '\0' a); echo done; read`)
	for _, l := range []Limits{{CPUMillis: 3000, MemoryBytes: 256 << 20}, {CPUMillis: 500, MemoryBytes: 96 << 20}} {
		if err := g.Update(l); err != nil {
			t.Fatalf("update to %+v: %v", l, err)
		}
		s, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if s.MemoryLimit != uint64(l.MemoryBytes) {
			t.Errorf("after %+v: memory limit %d", l, s.MemoryLimit)
		}
		if q := cpuQuota(t, g); q != l.CPUMillis*100 {
			t.Errorf("after %+v: CPU quota %d µs per 100 ms, want %d", l, q, l.CPUMillis*100)
		}
		if p := readFileTrim(t, filepath.Join(g.pidsDir(), "pids.max")); p != "32" {
			t.Errorf("after %+v: pids.max %s, want 32", l, p)
		}
	}
	if err := g.Update(Limits{CPUMillis: 500, MemoryBytes: 4 << 20}); err == nil {
		t.Error("memory of 4 MiB under a process holding 24 MB was set")
	}
}

// cpuQuota is the group's CPU quota per 100 ms period, in µs.
func cpuQuota(t *testing.T, g *Group) int64 {
	t.Helper()
	if i, ok := g.impl.(*v1); ok {
		q, err := strconv.ParseInt(readFileTrim(t, filepath.Join(i.dir(cgroup1.Cpu), "cpu.cfs_quota_us")), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	f := strings.Fields(readFileTrim(t, filepath.Join(g.impl.(*v2).path, "cpu.max")))
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func readFileTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// runIn starts bash running script in g (the script reads a line before
// it does anything, then prints "done" when ready) and returns once it
// printed it; the shell is killed at the test's end.
func runIn(t *testing.T, g *Group, script string) {
	t.Helper()
	c := exec.Command("bash", "-c", script)
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	if err := g.Add(c.Process.Pid); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("\n"))
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf[:4]) != "done" {
		t.Fatalf("the shell said %q (%v)", buf, err)
	}
}
