package namespaces

import (
	"context"
	"net/netip"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

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
	for _, variant := range []string{"namespaces", "namespaces+userns", "namespaces+network"} {
		b.Run(variant, func(b *testing.B) {
			t := &testing.T{}
			e := testEnv(t)
			d := e.driverWith(t, releaseBinary())
			spec := e.spec()
			spec.UserNamespace = variant == "namespaces+userns"
			var nets *network.Manager
			if variant == "namespaces+network" {
				var err error
				nets, err = network.New(network.Config{Range: netip.MustParsePrefix("198.19.248.0/22"), Table: "cove-bench", PoolSize: 16}, logx.Discard())
				if err != nil {
					b.Fatal(err)
				}
				defer nets.Close()
				time.Sleep(500 * time.Millisecond) // let the pool fill, as a running node's is
			}
			ctx := context.Background()
			var samples []time.Duration
			for b.Loop() {
				id := isolationtest.NewID()
				start := time.Now()
				var n *network.Net
				if nets != nil {
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
				if n != nil {
					nets.Release(n)
				}
				b.StartTimer()
			}
			reportLatency(b, samples)
		})
	}
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
