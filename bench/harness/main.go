// Command harness measures Cove end to end through the Go SDK, against a
// server without warm sandboxes (-cold) and one with them (-pooled), and
// prints `go test -bench` lines for benchreport:
//
//   - E2E/spawn: one command (`echo hi`) in a running sandbox, the process
//     spawn through the SDK that pooled creates are held against;
//   - E2E/go-sdk/cold and /pooled: create → first output of that command;
//   - Create/pooled and /pooled-keyed: a pooled create alone, without and
//     with an Idempotency-Key, interleaved;
//   - ExecRTT: `true` in a running sandbox;
//   - Files/go-sdk: upload and download of 1, 50 and 256 MiB;
//   - Burst100: 100 concurrent create + exec (pooled server);
//   - Sustained: creates per second over -sustain with 4 workers, and the
//     host CPU time (all cores, user + system) each create + kill cost;
//   - IdleMemory/N: host memory per idle sandbox with N alive, and what
//     each sandbox's cgroup counts;
//   - with -gvisor (a server whose sandboxes run on gVisor, none warm):
//     E2E/go-sdk/gvisor, ExecRTT/gvisor, ForkExec200/{namespaces,gvisor}
//     (200 fork+exec of /bin/true in a shell, the syscall-heavy figure) and
//     IdleMemoryGvisor/N;
//   - with -microvm (sandboxes in microVMs, none warm): the same figures
//     of microVMs and, one after the other, of -cold's and -gvisor's
//     sandboxes (/<driver>-beside-vm), and IdleMemoryBesideVM/<driver>/5;
//   - with -only flood: Flood/{keepalive,new-connection}, the API's
//     requests per second without and with -flood idle connections held
//     from -flood-from;
//   - Persist/{namespaces,gvisor}/…: pause and resume with and without
//     memory, snapshot, create from a snapshot, fork of 10 (-cold and
//     -gvisor servers).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

func main() {
	cold := flag.String("cold", "", "API URL of a server without warm sandboxes")
	pooled := flag.String("pooled", "", "API URL of a server with warm sandboxes")
	burstURL := flag.String("burst", "", "API URL of a server sized for bursts (default: -pooled)")
	key := flag.String("key", os.Getenv("COVE_API_KEY"), "API key of both")
	n := flag.Int("n", 50, "samples per latency figure")
	sustain := flag.Duration("sustain", 60*time.Second, "how long the sustained create rate runs")
	mem := flag.String("mem", "200,500,1000", "live sandbox counts for the idle memory figure")
	only := flag.String("only", "", "run only this figure: sustained, memory (idle memory at -mem counts), hotpath (command, pooled create → first output, sustained: what a change to them costs), idempotency (pooled creates with and without a key), flood (API requests per second with and without idle connections held from -flood-from), gvisor, microvm, persistence, cluster")
	gvisorURL := flag.String("gvisor", "", "API URL of a server whose sandboxes run on gVisor")
	plainURL := flag.String("plain", "", "API URL of a server like -cold but without user namespaces (--userns=false)")
	diskURL := flag.String("gvisor-disk", "", "API URL of a gVisor server that writes paused sandboxes to disk at once")
	microvmURL := flag.String("microvm", "", "API URL of a server whose sandboxes run in microVMs, none warm")
	clusterURL := flag.String("cluster", "", "API URL of a cluster's API replica (cove api), measured beside -cold")
	metricsURL := flag.String("metrics", "", "Prometheus metrics URL of the -pooled server: each phase of its creates and kills, after the figures")
	floodFrom := flag.String("flood-from", "127.0.0.2", "the loopback address the flood of idle connections comes from (-only flood)")
	floodN := flag.Int("flood", 2000, "idle connections the flood holds (-only flood)")
	flag.Parse()
	ctx := context.Background()
	client := func(url string) *cove.Client {
		c, err := cove.NewClient(cove.WithAPIURL(url), cove.WithSandboxURL(url), cove.WithAPIKey(*key))
		check(err)
		return c
	}
	if *only == "flood" {
		floodFigures(ctx, *pooled, *key, *floodFrom, *floodN, 5*time.Second)
		return
	}
	if *only == "cluster" {
		clusterFigures(ctx, client(*cold), client(*clusterURL), *n, *sustain)
		return
	}
	p := client(*pooled)
	if *only == "sustained" {
		sustained(ctx, p, "Sustained", *sustain)
		return
	}
	if *only == "memory" {
		for _, s := range strings.Split(*mem, ",") {
			if count, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && count > 0 {
				idleMemory(ctx, p, "IdleMemory", count)
			}
		}
		return
	}
	if *only == "idempotency" {
		keyedCreates(ctx, p, *n)
		return
	}
	if *only == "hotpath" {
		spawn(ctx, p, *n)
		firstOutput(ctx, p, "E2E/go-sdk/pooled", *n)
		keyedCreates(ctx, p, *n)
		sustained(ctx, p, "Sustained", *sustain)
		if *metricsURL != "" {
			phases(*metricsURL)
		}
		return
	}
	if *only == "persistence" || *only == "" {
		if *cold != "" {
			persistence(ctx, client(*cold), "namespaces", min(*n, 20))
		}
		if *gvisorURL != "" {
			persistence(ctx, client(*gvisorURL), "gvisor", min(*n, 20))
		}
		if *diskURL != "" {
			diskResume(ctx, client(*diskURL), "gvisor", min(*n, 10))
		}
		if *only == "persistence" {
			return
		}
	}
	if *gvisorURL != "" && (*only == "" || *only == "gvisor") {
		gvisorFigures(ctx, p, client(*gvisorURL), *n)
		if *only == "gvisor" {
			return
		}
	}
	if *microvmURL != "" && (*only == "" || *only == "microvm") {
		// Beside its peers measured the same way, one after the other; few
		// guests, which boot under emulation without KVM.
		vmN := min(*n, 10)
		peers := map[string]string{"namespaces": *cold, "gvisor": *gvisorURL, "microvm": *microvmURL}
		for _, driver := range []string{"namespaces", "gvisor", "microvm"} {
			if peers[driver] == "" {
				continue
			}
			c := client(peers[driver])
			driverFigures(ctx, c, driver+"-beside-vm", vmN)
			idleMemory(ctx, c, "IdleMemoryBesideVM/"+driver, 5)
		}
		if *only == "microvm" {
			return
		}
	}
	spawn(ctx, p, *n)
	if *cold != "" {
		firstOutput(ctx, client(*cold), "E2E/go-sdk/cold", *n)
		if *plainURL != "" {
			usernsFigures(ctx, client(*cold), client(*plainURL), *n, *sustain)
		}
	}
	firstOutput(ctx, p, "E2E/go-sdk/pooled", *n)
	keyedCreates(ctx, p, *n)
	files(ctx, p)
	if *burstURL != "" {
		burst(ctx, client(*burstURL), 100)
	} else {
		burst(ctx, p, 100)
	}
	sustained(ctx, p, "Sustained", *sustain)
	if *metricsURL != "" {
		phases(*metricsURL)
	}
	for _, s := range strings.Split(*mem, ",") {
		if count, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && count > 0 {
			idleMemory(ctx, p, "IdleMemory", count)
		}
	}
}

// live are the sandboxes the harness made and has not killed: a failed
// run kills them before it exits.
var live sync.Map // *cove.Sandbox → struct{}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		live.Range(func(k, _ any) bool { _ = k.(*cove.Sandbox).Kill(ctx); return true })
		cancel()
		os.Exit(1)
	}
}

// kill ends a sandbox the harness made.
func kill(ctx context.Context, s *cove.Sandbox) error {
	live.Delete(s)
	return s.Kill(ctx)
}

// report prints a latency line: p50, p95, p99 in ms.
func report(name string, xs []time.Duration, extra string) {
	slices.Sort(xs)
	at := func(q float64) float64 { return float64(xs[int(q*float64(len(xs)-1))]) / float64(time.Millisecond) }
	fmt.Printf("Benchmark%s %d 0 ns/op %.2f p50-ms %.2f p95-ms %.2f p99-ms%s\n", name, len(xs), at(0.5), at(0.95), at(0.99), extra)
}

func create(ctx context.Context, c *cove.Client) *cove.Sandbox {
	s, err := c.Create(ctx, cove.CreateOptions{Timeout: 10 * time.Minute})
	check(err)
	live.Store(s, struct{}{})
	return s
}

func run(ctx context.Context, s *cove.Sandbox, cmd string) {
	res, err := s.Commands.Run(ctx, cmd)
	check(err)
	if cmd == "echo hi" && res.Stdout != "hi\n" {
		check(fmt.Errorf("echo hi printed %q", res.Stdout))
	}
}

// pace is the pause between the samples of a latency figure, the same for
// all of them: a client between two tasks, and time for the node's
// background work (refilling the pool, tearing down) to finish.
const pace = 150 * time.Millisecond

// spawn times one command in a running sandbox, and `true` (ExecRTT).
func spawn(ctx context.Context, c *cove.Client, n int) {
	s := create(ctx, c)
	defer kill(ctx, s)
	for name, cmd := range map[string]string{"E2E/spawn": "echo hi", "ExecRTT": "true"} {
		var xs []time.Duration
		for range n {
			time.Sleep(pace)
			t := time.Now()
			run(ctx, s, cmd)
			xs = append(xs, time.Since(t))
		}
		report(name, xs, "")
	}
	loginShell(ctx, s, n)
}

// loginShell reports what bounds a command's round trip: E2B's login
// shell, `bash -l -c true`, timed inside the sandbox (the same loop as
// bench/js/computesdk.mjs's), in the sandbox ExecRTT ran in.
func loginShell(ctx context.Context, s *cove.Sandbox, n int) {
	res, err := s.Commands.Run(ctx, fmt.Sprintf(`for i in $(seq %d); do s=$EPOCHREALTIME; bash -l -c true; e=$EPOCHREALTIME; echo "$s $e"; done`, n))
	check(err)
	var xs []time.Duration
	for line := range strings.Lines(res.Stdout) {
		var start, end float64
		if _, err := fmt.Sscan(line, &start, &end); err != nil {
			check(fmt.Errorf("login shell timing %q: %w", line, err))
		}
		xs = append(xs, time.Duration((end-start)*float64(time.Second)))
	}
	report("LoginShell/go-sdk", xs, "")
}

// firstOutput times create → the first command's output, one sandbox after
// another (each killed before the next).
func firstOutput(ctx context.Context, c *cove.Client, name string, n int) {
	var xs []time.Duration
	for range n {
		time.Sleep(pace)
		t := time.Now()
		s := create(ctx, c)
		run(ctx, s, "echo hi")
		xs = append(xs, time.Since(t))
		check(kill(ctx, s))
	}
	report(name, xs, "")
}

// files measures upload and download throughput.
func files(ctx context.Context, c *cove.Client) {
	s := create(ctx, c)
	defer kill(ctx, s)
	for _, size := range []int{1 << 20, 50 << 20, 256 << 20} {
		data := make([]byte, size)
		rand.Read(data)
		label := fmt.Sprintf("%dMiB", size>>20)
		best := func(before, f func()) float64 { // the best of 3: throughput, not queueing
			var top float64
			for range 3 {
				before()
				t := time.Now()
				f()
				top = max(top, float64(size)/(1<<20)/time.Since(t).Seconds())
			}
			return top
		}
		// An upload is written beside the file it replaces: the old copy
		// goes first, out of the timing, or 256 MiB twice would not fit.
		rm := func() { _, _ = s.Commands.Run(ctx, "rm -f /tmp/blob") }
		up := best(rm, func() { check(s.Files.WriteFile(ctx, "/tmp/blob", data)) })
		var got []byte
		down := best(func() {}, func() {
			r, err := s.Files.Read(ctx, "/tmp/blob")
			check(err)
			got, err = io.ReadAll(r)
			r.Close()
			check(err)
		})
		if !bytes.Equal(got, data) {
			check(fmt.Errorf("download of %s differs", label))
		}
		fmt.Printf("BenchmarkFiles/go-sdk/%s 3 0 ns/op %.1f upload-MB/s %.1f download-MB/s\n", label, up, down)
		_, _ = s.Commands.Run(ctx, "rm -f /tmp/blob")
	}
}

// burst starts n create + exec at once.
func burst(ctx context.Context, c *cove.Client, n int) {
	var mu sync.Mutex
	var xs []time.Duration
	var all []*cove.Sandbox
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			s := create(ctx, c)
			run(ctx, s, "echo hi")
			mu.Lock()
			xs = append(xs, time.Since(t))
			all = append(all, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	report("Burst100", xs, fmt.Sprintf(" %.1f wall-ms", float64(wall)/float64(time.Millisecond)))
	killAll(ctx, all)
}

func killAll(ctx context.Context, all []*cove.Sandbox) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, s := range all {
		wg.Add(1)
		sem <- struct{}{}
		go func() { defer wg.Done(); defer func() { <-sem }(); check(kill(ctx, s)) }()
	}
	wg.Wait()
}

// sustained runs create + kill with 4 workers for d and reports creates/s.
func sustained(ctx context.Context, c *cove.Client, name string, d time.Duration) {
	var count atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	start := time.Now()
	busy := cpuBusy()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				s := create(ctx, c)
				count.Add(1)
				check(kill(ctx, s))
			}
		}()
	}
	wg.Wait()
	rate := float64(count.Load()) / time.Since(start).Seconds()
	cpu := float64(cpuBusy()-busy) / float64(time.Millisecond) / float64(max(count.Load(), 1))
	fmt.Printf("Benchmark%s %d 0 ns/op %.1f creates/s %.0f seconds %.1f cpu-ms/create\n", name, count.Load(), rate, d.Seconds(), cpu)
}

// idleMemory starts n idle sandboxes and reports what each costs the host
// (MemAvailable before and after, divided) and what its cgroup counts.
func idleMemory(ctx context.Context, c *cove.Client, name string, n int) {
	before := memAvailable()
	all := make([]*cove.Sandbox, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() { defer wg.Done(); defer func() { <-sem }(); all[i] = create(ctx, c) }()
	}
	wg.Wait()
	time.Sleep(3 * time.Second) // let the sandboxes settle into idleness
	after := memAvailable()
	var inside float64
	samples := 0
	for _, s := range all[:min(n, 50)] {
		if m, err := s.Metrics(ctx); err == nil && len(m) > 0 {
			inside += float64(m[len(m)-1].MemUsed)
			samples++
		}
	}
	host := float64(before-after) / float64(n) / (1 << 20)
	fmt.Printf("Benchmark%s/%d %d 0 ns/op %.2f host-MiB/sandbox %.2f cgroup-MiB/sandbox\n", name, n, n, host, inside/float64(max(samples, 1))/(1<<20))
	killAll(ctx, all)
}

// usernsFigures measures what user namespaces (the default) cost: a cold
// create → first output and idle memory, beside a server that runs its
// sandboxes without one. The two run one after the other, each measure on
// a quiet machine.
func usernsFigures(ctx context.Context, userns, plain *cove.Client, n int, d time.Duration) {
	firstOutput(ctx, plain, "E2E/go-sdk/cold-no-userns", n)
	sustained(ctx, plain, "SustainedCold/no-userns", d)
	sustained(ctx, userns, "SustainedCold/userns", d)
	idleMemory(ctx, plain, "IdleMemoryNoUserns", 50)
	idleMemory(ctx, userns, "IdleMemoryUserns", 50)
}

// gvisorFigures measures the gVisor driver beside the namespaces one: a
// cold create → first output, the exec round trip, a syscall-heavy loop in
// both, and idle memory.
func gvisorFigures(ctx context.Context, ns, gv *cove.Client, n int) {
	driverFigures(ctx, gv, "gvisor", n)
	forkExec(ctx, ns, "namespaces")
	idleMemory(ctx, gv, "IdleMemoryGvisor", 20)
}

// driverFigures measures the sandboxes of a server on another driver: a
// cold create → first output, the exec round trip and a syscall-heavy
// loop (E2E/go-sdk/<driver>, ExecRTT/<driver>, ForkExec200/<driver>).
func driverFigures(ctx context.Context, c *cove.Client, driver string, n int) {
	firstOutput(ctx, c, "E2E/go-sdk/"+driver, n)
	s := create(ctx, c)
	var xs []time.Duration
	for range n {
		time.Sleep(pace)
		t := time.Now()
		run(ctx, s, "true")
		xs = append(xs, time.Since(t))
	}
	report("ExecRTT/"+driver, xs, "")
	check(kill(ctx, s))
	forkExec(ctx, c, driver)
}

// forkExec times 200 fork+execs of /bin/true in a shell (ForkExec200/name).
func forkExec(ctx context.Context, c *cove.Client, name string) {
	s := create(ctx, c)
	var xs []time.Duration
	for range 5 {
		t := time.Now()
		run(ctx, s, "for i in $(seq 200); do /bin/true; done")
		xs = append(xs, time.Since(t))
	}
	report("ForkExec200/"+name, xs, "")
	check(kill(ctx, s))
}

// cpuBusy is the time all of the host's cores spent not idle (user, nice,
// system, interrupts) since boot, from /proc/stat.
func cpuBusy() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	check(err)
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal
	var ticks int64
	for i, v := range f[1:min(len(f), 8)] { // not steal
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}

func memAvailable() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	check(err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
