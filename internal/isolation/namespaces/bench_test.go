package namespaces

import (
	"context"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
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
	for _, variant := range []string{"namespaces", "namespaces+userns", "namespaces+network", "namespaces+network-quiet"} {
		b.Run(variant, func(b *testing.B) {
			t := &testing.T{}
			e := testEnv(t)
			d := e.driverWith(t, releaseBinary())
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
