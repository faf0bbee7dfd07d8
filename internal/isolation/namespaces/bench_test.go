package namespaces

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/network"
)

// reportLatency adds median and tail figures of individual runs.
func reportLatency(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkCreateReady measures Create until the agent inside listens
// (destroy is not timed), with the release binary when it is built: plain,
// in a user namespace, and with a network from the pool (taking it from
// the pool is timed).
func BenchmarkCreateReady(b *testing.B) {
	for _, variant := range []string{"namespaces", "namespaces+sandbox-binary", "namespaces+userns", "namespaces+network", "namespaces+network-quiet"} {
		b.Run(variant, func(b *testing.B) {
			t := &testing.T{}
			e := testEnv(t)
			binary := releaseBinary()
			if variant == "namespaces+sandbox-binary" {
				if binary = binaries()["sandbox-binary"]; binary == "" {
					b.Skip("no bin/cove-sandbox: make build")
				}
			}
			d := e.driverWith(t, binary)
			spec := e.spec()
			spec.UserNamespace = variant == "namespaces+userns"
			var nets *network.Manager
			// -quiet: every network is taken from the pool before the timed
			// loop and given back after it, so no refill and no network
			// teardown runs during a create: the cost on the create path alone.
			quiet := variant == "namespaces+network-quiet"
			var ready, used []*network.Net
			if strings.HasPrefix(variant, "namespaces+network") {
				var err error
				nets, err = network.New(network.Config{Range: netip.MustParsePrefix("198.19.248.0/22"), Table: "cove-bench", PoolSize: 16}, logx.Discard())
				if err != nil {
					b.Fatal(err)
				}
				defer nets.Close()
				time.Sleep(500 * time.Millisecond) // let the pool fill, as a running node's is
				if quiet {
					defer func() {
						for _, n := range used {
							nets.Release(n)
						}
					}()
				}
			}
			ctx := context.Background()
			var samples []time.Duration
			for b.Loop() {
				id := isolationtest.NewID()
				start := time.Now()
				var n *network.Net
				switch {
				case quiet:
					if len(ready) == 0 {
						b.StopTimer()
						for range 25 {
							n, err := nets.Acquire(ctx, true)
							if err != nil {
								b.Fatal(err)
							}
							ready = append(ready, n)
						}
						time.Sleep(100 * time.Millisecond) // let the refill settle
						b.StartTimer()
						start = time.Now()
					}
					n, ready = ready[0], ready[1:]
					spec.NetNS = n.NS
				case nets != nil:
					var err error
					if n, err = nets.Acquire(ctx, true); err != nil {
						b.Fatal(err)
					}
					spec.NetNS = n.NS
				}
				if _, err := d.Create(ctx, id, spec); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(start))
				b.StopTimer()
				if err := d.Destroy(ctx, id); err != nil {
					b.Fatal(err)
				}
				if quiet {
					used = append(used, n) // given back after the loop
				} else if n != nil {
					nets.Release(n)
				}
				b.StartTimer()
			}
			reportLatency(b, samples)
		})
	}
}

// BenchmarkTemplateCreate compares create → ready of a built template
// (base + 8 layers) with base's, alternating the two in one loop so the
// machine's drift hits both alike.
func BenchmarkTemplateCreate(b *testing.B) {
	t := &testing.T{}
	e := testEnv(t)
	d := e.driverWith(t, releaseBinary())
	base := e.spec()
	built := e.spec()
	built.RootFS.Layers = append(append([]string(nil), base.RootFS.Layers...), builtLayers(b, e.dir, 8)...)
	ctx := context.Background()
	var samples [2][]time.Duration
	for b.Loop() {
		for i, spec := range []isolation.Spec{base, built} {
			id := isolationtest.NewID()
			start := time.Now()
			if _, err := d.Create(ctx, id, spec); err != nil {
				b.Fatal(err)
			}
			samples[i] = append(samples[i], time.Since(start))
			b.StopTimer()
			if err := d.Destroy(ctx, id); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	p50 := func(xs []time.Duration) float64 {
		slices.Sort(xs)
		return float64(xs[len(xs)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(p50(samples[0]), "base-p50-ms")
	b.ReportMetric(p50(samples[1]), "built-p50-ms")
}

// builtLayers makes n layers like a template build's steps leave (a few
// files each) to stack over the base template's.
func builtLayers(b *testing.B, dir string, n int) []string {
	var out []string
	for i := range n {
		l := filepath.Join(dir, fmt.Sprintf("bench-layer-%d", i))
		if err := os.MkdirAll(filepath.Join(l, "opt", "step", strconv.Itoa(i)), 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 20 {
			os.WriteFile(filepath.Join(l, "opt", "step", strconv.Itoa(i), strconv.Itoa(j)), []byte("file"), 0o644)
		}
		out = append(out, l)
	}
	return out
}

// BenchmarkFloor measures the kernel's floor for the same work: fork+exec
// of /bin/true, and the same in the namespaces a sandbox gets.
func BenchmarkFloor(b *testing.B) {
	floors := []struct {
		name  string
		flags uintptr
		user  bool
	}{
		{"fork-exec", 0, false},
		{"unshare-exec", cloneFlags | syscall.CLONE_NEWCGROUP, false},
		{"unshare-userns-exec", cloneFlags | syscall.CLONE_NEWCGROUP, true},
	}
	for _, f := range floors {
		b.Run(f.name, func(b *testing.B) {
			var samples []time.Duration
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: f.flags}
				if f.user {
					ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: DefaultUserNSBase, Size: userNSSize}}
					cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
					cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings = ids, ids
					cmd.SysProcAttr.Credential = &syscall.Credential{}
				}
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(start))
			}
			reportLatency(b, samples)
		})
	}
}

// BenchmarkDisk100 starts 100 sandboxes from one built template (base + 8
// layers), each writing 1 MiB, and reports the host disk they take beside
// the template's layers: the template is stored once and stacked, never
// copied; a sandbox's writes go to its own size-capped layer (tmpfs,
// charged to its memory limit).
func BenchmarkDisk100(b *testing.B) {
	const n = 100
	t := &testing.T{}
	e := testEnv(t)
	d := e.driverWith(t, releaseBinary())
	spec := e.spec()
	spec.Limits.MemoryMB = 64
	spec.RootFS.Layers = append(spec.RootFS.Layers, builtLayers(b, e.dir, 8)...)
	ctx := context.Background()
	for b.Loop() {
		var ids []string
		var writes int64
		for range n {
			id := isolationtest.NewID()
			if _, err := d.Create(ctx, id, spec); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
			c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
			if res, err := c.Run(ctx, "root", "head -c 1048576 /dev/zero > /tmp/mine", 0); err != nil || res.ExitCode != 0 {
				b.Fatalf("write: %v %s", err, res.Stderr)
			}
			c.Close()
			st, err := d.Stats(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			writes += int64(st.DiskUsed)
		}
		host := treeBytes(b, filepath.Join(e.dir, "sandboxes"))
		var layers int64
		for _, l := range spec.RootFS.Layers {
			layers += treeBytes(b, l)
		}
		b.ReportMetric(float64(layers)/(1<<20), "template-MiB")
		b.ReportMetric(float64(host)/n/1024, "host-disk-KiB/sandbox")
		b.ReportMetric(float64(writes)/n/(1<<20), "own-layer-MiB/sandbox")
		for _, id := range ids {
			if err := d.Destroy(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// treeBytes is the disk a tree takes on its own file system (allocated
// blocks; other mounts are not entered).
func treeBytes(b *testing.B, root string) int64 {
	var st syscall.Stat_t
	if err := syscall.Lstat(root, &st); err != nil {
		b.Fatal(err)
	}
	dev := st.Dev
	var total int64
	filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var s syscall.Stat_t
		if syscall.Lstat(p, &s) != nil || s.Dev != dev {
			return filepath.SkipDir
		}
		total += s.Blocks * 512
		return nil
	})
	return total
}

// BenchmarkPauseResume times a pause (the cgroup freezer) and a resume of
// one idle sandbox, and the same with 100 MiB of its memory dirtied.
func BenchmarkPauseResume(b *testing.B) {
	for _, variant := range []string{"idle", "100MiB-dirty"} {
		b.Run(variant, func(b *testing.B) {
			t := &testing.T{}
			e := testEnv(t)
			d := e.driverWith(t, releaseBinary())
			spec := e.spec()
			spec.Limits.MemoryMB = 512
			ctx := context.Background()
			id := isolationtest.NewID()
			if _, err := d.Create(ctx, id, spec); err != nil {
				b.Fatal(err)
			}
			defer d.Destroy(ctx, id)
			if variant != "idle" {
				c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
				defer c.Close()
				// Dirty 100 MiB and hold it (the command returns at once).
				if res, err := c.Run(ctx, "root", "python3 -c 'import time; b = bytearray(100 << 20); b[::4096] = b\"\\1\" * (len(b) // 4096); open(\"/tmp/ready\", \"w\").close(); time.sleep(3600)' >/dev/null 2>&1 & while [ ! -e /tmp/ready ]; do sleep 0.05; done", 0); err != nil || res.ExitCode != 0 {
					b.Fatalf("dirty memory: %v %+v", err, res)
				}
			}
			var pauses, resumes []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := d.Pause(ctx, id); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := d.Resume(ctx, id); err != nil {
					b.Fatal(err)
				}
				pauses, resumes = append(pauses, mid.Sub(start)), append(resumes, time.Since(mid))
			}
			b.ReportMetric(float64(median(pauses).Microseconds())/1000, "pause-p50-ms")
			b.ReportMetric(float64(median(resumes).Microseconds())/1000, "resume-p50-ms")
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
