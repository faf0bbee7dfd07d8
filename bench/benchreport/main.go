// Command benchreport turns `go test -bench` output (on stdin) into the
// markdown tables of docs/BENCHMARKS.md: per benchmark the median of each
// metric over the runs, and the ratios the goals are stated in.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/isolation/microvm"
)

func main() {
	out := flag.String("o", "docs/BENCHMARKS.md", "file to write")
	flag.Parse()
	samples := map[string]map[string][]float64{} // benchmark → unit → values
	var order []string
	var notes []string // "# peer … cannot run here: …"
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "# peer ") {
			notes = append(notes, "Not measured: "+strings.TrimPrefix(line, "# peer ")+".")
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // drop the GOMAXPROCS suffix
			}
		}
		if samples[name] == nil {
			samples[name] = map[string][]float64{}
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				samples[name][f[i+1]] = append(samples[name][f[i+1]], v)
			}
		}
	}
	median := func(name, unit string) float64 {
		xs := slices.Clone(samples[name][unit])
		if len(xs) == 0 {
			return 0
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\nWritten by `make bench` (scripts/bench.sh) on %s. Medians over the runs of one\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "`make bench`; p50/p95/p99 are over the individual operations of a run. Compare ratios measured\nin one run, not absolute times across runs: this machine is a shared, nested VM.\n\n")
	fmt.Fprintf(&b, "## Machine\n\n```\n%s```\n\n", machine())
	if spawn := median("E2E/spawn", "p50-ms"); spawn > 0 {
		fmt.Fprintf(&b, "## Create → first output, end to end\n\n")
		fmt.Fprintf(&b, "`create` then `commands.run('echo hi')` through each SDK against `cove server` on loopback, one\n")
		fmt.Fprintf(&b, "sandbox after another (each killed before the next, 150 ms apart; the Python SDK with its sync\n")
		fmt.Fprintf(&b, "client, then its async one): cold = a server without warm\n")
		fmt.Fprintf(&b, "sandboxes, pooled = one keeping 8 warm per template. spawn = the same command in a running\n")
		fmt.Fprintf(&b, "sandbox, at the same pace.\n\n")
		fmt.Fprintf(&b, "| figure | p50 ms | p95 ms | p99 ms |\n|---|---:|---:|---:|\n")
		for _, name := range []string{"E2E/spawn", "ExecRTT", "E2E/go-sdk/cold", "E2E/go-sdk/pooled", "E2E/js-sdk/cold", "E2E/js-sdk/pooled",
			"E2E/py-sdk-sync/cold", "E2E/py-sdk-sync/pooled", "E2E/py-sdk-async/cold", "E2E/py-sdk-async/pooled", "Create/pooled", "Create/pooled-keyed"} {
			if len(samples[name]["p50-ms"]) > 0 {
				fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f |\n", name, median(name, "p50-ms"), median(name, "p95-ms"), median(name, "p99-ms"))
			}
		}
		fmt.Fprintf(&b, "\n| goal | value | target |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| pooled create → first output / one spawn, Go SDK | %.2f× | ≤ 1.3× |\n", median("E2E/go-sdk/pooled", "p50-ms")/spawn)
		if js := median("E2E/js-sdk/pooled", "p50-ms"); js > 0 {
			fmt.Fprintf(&b, "| pooled create → first output, official JS SDK | %.1f ms | ≤ 25 ms |\n", js)
			for _, client := range []string{"sync", "async"} {
				if py := median("E2E/py-sdk-"+client+"/pooled", "p50-ms"); py > 0 {
					fmt.Fprintf(&b, "| pooled create → first output, official Python SDK (%s) − JS SDK | %+.1f ms | ≤ +5 ms |\n", client, py-js)
				}
			}
		}
		if plain, keyed := median("Create/pooled", "p50-ms"), median("Create/pooled-keyed", "p50-ms"); plain > 0 && keyed > 0 {
			fmt.Fprintf(&b, "| an Idempotency-Key on a pooled create (interleaved with creates without), p50 / p99 | %+.2f / %+.2f ms | |\n",
				keyed-plain, median("Create/pooled-keyed", "p99-ms")-median("Create/pooled", "p99-ms"))
		}
		if floor := median("Peer/unshare-exec", "p50-ms"); floor > 0 {
			fmt.Fprintf(&b, "| cold create → first output (Go SDK) / `unshare` + exec | %.1f× | ≤ 2× |\n", median("E2E/go-sdk/cold", "p50-ms")/floor)
		}
		if w := median("Burst100", "wall-ms"); w > 0 {
			fmt.Fprintf(&b, "| 100 concurrent create + exec on a node keeping 100 warm, wall time (p50 %.0f ms, p99 %.0f ms each) | %.0f ms | ≤ 1000 ms |\n",
				median("Burst100", "p50-ms"), median("Burst100", "p99-ms"), w)
		}
		if r := median("Sustained", "creates/s"); r > 0 {
			fmt.Fprintf(&b, "| sustained creates per second (create + kill, 4 clients, %.0f s) | %.1f | ≥ 100 |\n", median("Sustained", "seconds"), r)
			if cpu := median("Sustained", "cpu-ms/create"); cpu > 0 {
				fmt.Fprintf(&b, "| host CPU per create + kill in that run (all cores; %d cores allow at most %.0f/s) | %.1f ms | ≤ %.0f ms |\n",
					runtime.NumCPU(), float64(runtime.NumCPU())*1000/cpu, cpu, float64(runtime.NumCPU())*1000/100)
			}
		}
		b.WriteString("\n")
	}
	var phases []string
	for _, name := range order {
		if strings.HasPrefix(name, "Phase/") {
			phases = append(phases, name)
		}
	}
	if len(phases) > 0 {
		fmt.Fprintf(&b, "## Where a create's and a kill's time goes\n\n")
		fmt.Fprintf(&b, "`cove_sandbox_phase_seconds` of the pooled server after the figures above (pooled creates, then\n")
		fmt.Fprintf(&b, "4 clients creating and killing: most of those creates are cold, the pool cannot keep up), in the order\n")
		fmt.Fprintf(&b, "each operation runs them; p50 interpolated in the histogram's buckets (coarse below 0.1 ms). warm =\n")
		fmt.Fprintf(&b, "a warm sandbox made in the background, at a lower priority.\n\n")
		fmt.Fprintf(&b, "| operation | phase | p50 ms | mean ms |\n|---|---|---:|---:|\n")
		for _, name := range phases {
			op, ph, _ := strings.Cut(strings.TrimPrefix(name, "Phase/"), "/")
			fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f |\n", op, ph, median(name, "p50-ms"), median(name, "mean-ms"))
		}
		b.WriteString("\n")
	}
	if floor := median("ComputeSDK/floor", "p50-ms"); floor > 0 {
		computeSDK(&b, median, floor)
	}
	if median("Flood/keepalive", "quiet-req/s") > 0 {
		flood(&b, median)
	}
	var peers []string
	for _, name := range order {
		if strings.HasPrefix(name, "Peer/") {
			peers = append(peers, name)
		}
	}
	if len(peers) > 0 {
		cold, pooled := median("E2E/go-sdk/cold", "p50-ms"), median("E2E/go-sdk/pooled", "p50-ms")
		fmt.Fprintf(&b, "## Beside its peers\n\n`/bin/echo hi` started by each peer over the same root (the host's /usr read-only), start to\n")
		fmt.Fprintf(&b, "exit; Cove's figure is create → first output of the same command through the Go SDK (an API\n")
		fmt.Fprintf(&b, "call, a sandbox with its own network, an agent, and the command through the proxy).\n\n")
		fmt.Fprintf(&b, "| peer | p50 ms | Cove cold / peer | Cove pooled / peer |\n|---|---:|---:|---:|\n")
		for _, name := range peers {
			p := median(name, "p50-ms")
			fmt.Fprintf(&b, "| %s | %.2f | %.1f× | %.1f× |\n", strings.TrimPrefix(name, "Peer/"), p, cold/p, pooled/p)
		}
		for _, line := range notes {
			fmt.Fprintf(&b, "\n%s\n", line)
		}
		b.WriteString("\n")
	}
	if len(samples["Files/go-sdk/1MiB"]["upload-MB/s"]) > 0 {
		fmt.Fprintf(&b, "## Files and memory\n\nRandom bytes written then read back through each SDK, the best of 3 each; a read takes at most\n")
		fmt.Fprintf(&b, "1.5 times its write (the goal: downloads are gzipped only where it pays).\n\n")
		fmt.Fprintf(&b, "| SDK, size | upload MB/s | download MB/s | read time / write time | goal |\n|---|---:|---:|---:|---:|\n")
		for _, sdk := range []string{"go-sdk", "js-sdk", "py-sdk"} {
			for _, size := range []string{"1MiB", "50MiB", "256MiB"} {
				name := "Files/" + sdk + "/" + size
				up, down := median(name, "upload-MB/s"), median(name, "download-MB/s")
				if up == 0 || down == 0 {
					continue
				}
				fmt.Fprintf(&b, "| %s, %s | %.0f | %.0f | %.2f | ≤ 1.5 |\n", sdk, size, up, down, up/down)
			}
		}
		fmt.Fprintf(&b, "\n| figure | value | goal |\n|---|---:|---:|\n")
		for _, name := range order {
			if strings.HasPrefix(name, "IdleMemory/") {
				n := strings.TrimPrefix(name, "IdleMemory/")
				fmt.Fprintf(&b, "| host memory per idle sandbox, %s alive (MemAvailable delta / n) | %.2f MiB | ≤ 8 MiB |\n", n, median(name, "host-MiB/sandbox"))
				fmt.Fprintf(&b, "| … what each one's cgroup counts | %.2f MiB | |\n", median(name, "cgroup-MiB/sandbox"))
			}
		}
		b.WriteString("\n")
	}
	if plain := median("E2E/go-sdk/cold-no-userns", "p50-ms"); plain > 0 {
		fmt.Fprintf(&b, "## User namespaces (the default) and without\n\n")
		fmt.Fprintf(&b, "The cold server (every sandbox in a user namespace of its own, its layers and binds id-mapped\n")
		fmt.Fprintf(&b, "mounts) beside one started with `--userns=false`, in the same run. Go cannot vfork a child that\n")
		fmt.Fprintf(&b, "gets a new user namespace (the child waits for its id maps): the server's spawner process, a few\n")
		fmt.Fprintf(&b, "megabytes, forks instead of the server, whose page tables and heap a fork would copy.\n\n")
		fmt.Fprintf(&b, "| figure (p50) | without | with | with − without |\n|---|---:|---:|---:|\n")
		cold := median("E2E/go-sdk/cold", "p50-ms")
		fmt.Fprintf(&b, "| create → first output, Go SDK, cold (ms) | %.1f | %.1f | %+.1f (%.2f×) |\n", plain, cold, cold-plain, cold/plain)
		a, c := median("IdleMemoryNoUserns/50", "host-MiB/sandbox"), median("IdleMemoryUserns/50", "host-MiB/sandbox")
		fmt.Fprintf(&b, "| host memory per idle sandbox, 50 alive (MiB) | %.2f | %.2f | %+.2f |\n", a, c, c-a)
		if a, c := median("SustainedCold/no-userns", "creates/s"), median("SustainedCold/userns", "creates/s"); a > 0 && c > 0 {
			fmt.Fprintf(&b, "| sustained creates per second, no warm sandboxes (create + kill, 4 clients) | %.1f | %.1f | %.2f× |\n", a, c, c/a)
			a, c = median("SustainedCold/no-userns", "cpu-ms/create"), median("SustainedCold/userns", "cpu-ms/create")
			fmt.Fprintf(&b, "| host CPU per create + kill in that run (ms) | %.1f | %.1f | %+.1f |\n", a, c, c-a)
		}
		b.WriteString("\n")
	}
	if pooled := median("E2E/code-interpreter/pooled", "p50-ms"); pooled > 0 {
		fmt.Fprintf(&b, "## Code interpreter\n\n")
		fmt.Fprintf(&b, "Through the official `@e2b/code-interpreter`: `Sandbox.create(template)` then `runCode('1+1')`, and\n")
		fmt.Fprintf(&b, "`runCode('1+1')` round trips in one warm Python context. The template is base with the code\n")
		fmt.Fprintf(&b, "interpreter as its start command (as code-interpreter-v1 has it); pooled sandboxes have their\n")
		fmt.Fprintf(&b, "kernels running already. The floor is the same kernel (IPython's) driven by the reference\n")
		fmt.Fprintf(&b, "client, `jupyter_client`, on the host.\n\n")
		fmt.Fprintf(&b, "| figure | p50 | goal |\n|---|---:|---|\n")
		fmt.Fprintf(&b, "| pooled create → first `runCode('1+1')` result (ms) | %.1f | ≤ 40 |\n", pooled)
		if cold := median("E2E/code-interpreter/cold", "p50-ms"); cold > 0 {
			fmt.Fprintf(&b, "| cold create → first result (ms): both kernels start | %.0f | |\n", cold)
		}
		rtt := median("E2E/code-interpreter/runCode", "p50-ms")
		fmt.Fprintf(&b, "| `runCode('1+1')` round trip, warm context (ms) | %.1f | |\n", rtt)
		if cmd := median("E2E/code-interpreter/commands-run", "p50-ms"); cmd > 0 {
			fmt.Fprintf(&b, "| `commands.run('true')` round trip, same sandbox (ms) | %.1f | |\n", cmd)
		}
		if floor := median("Peer/jupyter-client", "p50-ms"); floor > 0 {
			fmt.Fprintf(&b, "| `jupyter_client` → IPython kernel, `1+1` (ms) | %.1f | |\n", floor)
			fmt.Fprintf(&b, "| round trip / the floor | %.2f× | ≤ 1.3× |\n", rtt/floor)
		}
		b.WriteString("\n")
	}
	if gv := median("E2E/go-sdk/gvisor", "p50-ms"); gv > 0 {
		fmt.Fprintf(&b, "## gVisor beside namespaces\n\n")
		fmt.Fprintf(&b, "A server whose sandboxes run on gVisor (runsc, systrap platform, no warm sandboxes) beside the\n")
		fmt.Fprintf(&b, "namespaces servers above, and plain `runsc do` over the host's root: Cove's overhead on top of gVisor.\n\n")
		fmt.Fprintf(&b, "| figure (p50) | namespaces | gVisor | gVisor / namespaces |\n|---|---:|---:|---:|\n")
		row := func(label, ns, g, unit, format string) {
			a, c := median(ns, unit), median(g, unit)
			if a > 0 && c > 0 {
				fmt.Fprintf(&b, "| %s | "+format+" | "+format+" | %.1f× |\n", label, a, c, c/a)
			}
		}
		row("create → first output, Go SDK, cold (ms)", "E2E/go-sdk/cold", "E2E/go-sdk/gvisor", "p50-ms", "%.1f")
		row("exec round trip, `true` (ms)", "ExecRTT", "ExecRTT/gvisor", "p50-ms", "%.2f")
		row("200 × fork+exec of /bin/true in a shell (ms)", "ForkExec200/namespaces", "ForkExec200/gvisor", "p50-ms", "%.0f")
		for _, name := range order {
			if n, ok := strings.CutPrefix(name, "IdleMemoryGvisor/"); ok {
				fmt.Fprintf(&b, "| host memory per idle sandbox (gVisor: %s alive; namespaces: 200) (MiB) | %.2f | %.2f | %.1f× |\n", n,
					median("IdleMemory/200", "host-MiB/sandbox"), median(name, "host-MiB/sandbox"),
					median(name, "host-MiB/sandbox")/median("IdleMemory/200", "host-MiB/sandbox"))
			}
		}
		if do := median("Peer/runsc-do", "p50-ms"); do > 0 {
			fmt.Fprintf(&b, "\n| gVisor alone | p50 ms | Cove on gVisor, cold / it | goal |\n|---|---:|---:|---:|\n")
			fmt.Fprintf(&b, "| `runsc do /bin/echo hi` (network none) | %.1f | %.2f× | ≤ 1.5× |\n", do, gv/do)
		}
		b.WriteString("\n")
	}
	if vm := median("E2E/go-sdk/microvm-beside-vm", "p50-ms"); vm > 0 {
		accel := "**Under TCG**: QEMU emulates the guests' processors, because this host has no KVM. These are\nnot KVM figures."
		if microvm.KVMAvailable() { // as the driver decides: PVM's KVM alone runs no guest of ours
			accel = "The guests ran under KVM."
		}
		fmt.Fprintf(&b, "## microVMs beside namespaces and gVisor\n\n")
		fmt.Fprintf(&b, "A server whose sandboxes run in microVMs (QEMU's microvm machine; guests from boot snapshots, the\n")
		fmt.Fprintf(&b, "default since they start several times faster than booted ones; no warm sandboxes, no sandbox\n")
		fmt.Fprintf(&b, "network), measured one after the other with cold namespaces and gVisor servers, 5 idle sandboxes\n")
		fmt.Fprintf(&b, "alive each; the guests see the base template's `/usr` on an image of the host's, made before the\nfigures. %s On a host with `/dev/kvm`, the same `make bench` measures\nKVM guests: the driver uses KVM wherever it opens.\n\n", accel)
		fmt.Fprintf(&b, "| figure (p50) | namespaces | gVisor | microVM | microVM / namespaces |\n|---|---:|---:|---:|---:|\n")
		row := func(label, figure, unit, format string) {
			ns, gv, mv := median(figure+"/namespaces-beside-vm", unit), median(figure+"/gvisor-beside-vm", unit), median(figure+"/microvm-beside-vm", unit)
			if ns > 0 && mv > 0 {
				fmt.Fprintf(&b, "| %s | "+format+" | "+format+" | "+format+" | %.1f× |\n", label, ns, gv, mv, mv/ns)
			}
		}
		row("create → first output, Go SDK, cold (ms)", "E2E/go-sdk", "p50-ms", "%.1f")
		row("exec round trip, `true` (ms)", "ExecRTT", "p50-ms", "%.2f")
		row("200 × fork+exec of /bin/true in a shell (ms)", "ForkExec200", "p50-ms", "%.0f")
		for _, m := range []struct{ label, unit string }{
			{"host memory per idle sandbox, 5 alive (MiB)", "host-MiB/sandbox"},
			{"their cgroups' memory per idle sandbox, 5 alive (MiB)", "cgroup-MiB/sandbox"},
		} {
			idle := func(d string) float64 { return median("IdleMemoryBesideVM/"+d+"/5", m.unit) }
			if idle("microvm") > 0 { // a few MiB: the namespaces figure is within the host's noise
				ratio := "—"
				if idle("namespaces") >= 1 {
					ratio = fmt.Sprintf("%.1f×", idle("microvm")/idle("namespaces"))
				}
				fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %s |\n", m.label, idle("namespaces"), idle("gvisor"), idle("microvm"), ratio)
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "## Create → agent ready (namespaces driver)\n\n")
	fmt.Fprintf(&b, "| benchmark | p50 ms | p95 ms | p99 ms |\n|---|---:|---:|---:|\n")
	for _, name := range order {
		if len(samples[name]["p50-ms"]) == 0 || !strings.HasPrefix(name, "CreateReady/") && !strings.HasPrefix(name, "Floor/") {
			continue // the end-to-end and peer figures have tables of their own
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f |\n", name, median(name, "p50-ms"), median(name, "p95-ms"), median(name, "p99-ms"))
	}
	floor := median("Floor/unshare-exec", "p50-ms")
	userFloor := median("Floor/unshare-userns-exec", "p50-ms")
	if floor > 0 {
		fmt.Fprintf(&b, "\n| ratio (p50) | value | goal |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| create → ready / `unshare` + exec floor | %.1f× | ≤ 2× |\n", median("CreateReady/namespaces", "p50-ms")/floor)
		if sb := median("CreateReady/namespaces+sandbox-binary", "p50-ms"); sb > 0 {
			fmt.Fprintf(&b, "| create → ready from cove-sandbox / `unshare` + exec floor | %.1f× | ≤ 2× |\n", sb/floor)
		}
		fmt.Fprintf(&b, "| create → ready / fork+exec floor | %.1f× | |\n", median("CreateReady/namespaces", "p50-ms")/median("Floor/fork-exec", "p50-ms"))
		if userFloor > 0 {
			fmt.Fprintf(&b, "| create → ready with a user namespace / `unshare -U` + exec floor | %.1f× | |\n", median("CreateReady/namespaces+userns", "p50-ms")/userFloor)
			fmt.Fprintf(&b, "| user namespace cost, sandbox (p50 userns − p50 plain) | %+.2f ms | |\n", median("CreateReady/namespaces+userns", "p50-ms")-median("CreateReady/namespaces", "p50-ms"))
			fmt.Fprintf(&b, "| user namespace cost, kernel floor | %+.2f ms | |\n", userFloor-floor)
		}
	}
	if plain, built := median("TemplateCreate", "base-p50-ms"), median("TemplateCreate", "built-p50-ms"); built > 0 {
		fmt.Fprintf(&b, "\n## Templates\n\n| figure | value | goal |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| create → ready, built template (base + 8 layers), p50, alternating with base | %.2f ms | |\n", built)
		fmt.Fprintf(&b, "| create → ready, base, p50, in the same loop | %.2f ms | |\n", plain)
		fmt.Fprintf(&b, "| built template / base | %.2f× | ≈ 1× |\n", built/plain)
		if tpl := median("Disk100", "template-MiB"); tpl > 0 {
			fmt.Fprintf(&b, "| 100 sandboxes of one template: the template's layers, stored once | %.2f MiB | |\n", tpl)
			fmt.Fprintf(&b, "| … host disk per sandbox besides them (directory, state, log) | %.1f KiB | ≈ 0 |\n", median("Disk100", "host-disk-KiB/sandbox"))
			fmt.Fprintf(&b, "| … each sandbox's own layer after writing 1 MiB (tmpfs, its memory) | %.2f MiB | = its writes |\n", median("Disk100", "own-layer-MiB/sandbox"))
		}
	}
	if plain, withNet := median("CreateReady/namespaces", "p50-ms"), median("CreateReady/namespaces+network", "p50-ms"); withNet > 0 {
		fmt.Fprintf(&b, "\n## Sandbox networking\n\n| figure | value | goal |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| create → ready with a pooled network − without (p50) | %+.2f ms | < 2 ms |\n", withNet-plain)
		if quiet := median("CreateReady/namespaces+network-quiet", "p50-ms"); quiet > 0 {
			fmt.Fprintf(&b, "| the same with no pool refill or network teardown during the creates − without | %+.2f ms | |\n", quiet-plain)
		}
		lo, veth, nat := median("TCPStream/host-loopback", "MB/s"), median("TCPStream/host-veth", "MB/s"), median("TCPStream/sandbox-nat", "MB/s")
		if lo > 0 && nat > 0 {
			fmt.Fprintf(&b, "| one TCP stream, host loopback | %.0f MB/s | |\n", lo)
			fmt.Fprintf(&b, "| one TCP stream, host → fake internet over one veth (no NAT) | %.0f MB/s | |\n", veth)
			fmt.Fprintf(&b, "| one TCP stream, sandbox → NAT → fake internet | %.0f MB/s | |\n", nat)
			fmt.Fprintf(&b, "| NAT egress / host loopback | %.0f%% | ≥ 80%% |\n", 100*nat/lo)
			fmt.Fprintf(&b, "| NAT egress / the same veth hop without Cove | %.0f%% | |\n", 100*nat/veth)
		}
	}
	if px := median("EgressProxy/stream", "MB/s"); px > 0 {
		fmt.Fprintf(&b, "\n## The egress proxy\n\n| figure | value | goal |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| one TCP stream through it (a name rule, allowed by address: copied) | %.0f MB/s | |\n", px)
		fmt.Fprintf(&b, "| … CPU of the process (both ends and the copies) per GiB | %.0f ms | |\n", median("EgressProxy/stream", "cpu-ms/GiB"))
		for _, row := range []struct{ name, floor, label string }{
			{"held-proxied", "held-direct", "a held connection, copied"},
			{"held-byname", "held-direct-web", "a held plain-HTTP connection allowed by a name alone (each request read)"},
		} {
			name, floor := "EgressProxy/"+row.name, "EgressProxy/"+row.floor
			if len(samples[name]["fds/conn"]) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s: descriptors | %.1f | 2 |\n", row.label, median(name, "fds/conn")-median(floor, "fds/conn"))
			fmt.Fprintf(&b, "| … heap and stacks | %.1f KiB | |\n", median(name, "KiB/conn")-median(floor, "KiB/conn"))
			fmt.Fprintf(&b, "| … descriptors still open half a second after it closed | %.1f | 0 |\n", median(name, "fds-left/conn"))
		}
	}
	if idle := median("PauseResume/idle", "resume-p50-ms"); idle > 0 {
		fmt.Fprintf(&b, "\n## Pause and resume (namespaces, the cgroup freezer, memory kept in place)\n\n| figure | value | goal |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| pause, idle sandbox, p50 | %.2f ms | |\n", median("PauseResume/idle", "pause-p50-ms"))
		fmt.Fprintf(&b, "| resume, idle sandbox, p50 | %.2f ms | ≤ 50 ms |\n", idle)
		fmt.Fprintf(&b, "| pause, 100 MiB dirtied, p50 | %.2f ms | |\n", median("PauseResume/100MiB-dirty", "pause-p50-ms"))
		fmt.Fprintf(&b, "| resume, 100 MiB dirtied, p50 | %.2f ms | ≤ 50 ms |\n", median("PauseResume/100MiB-dirty", "resume-p50-ms"))
	}
	if median("Persist/namespaces/snapshot", "p50-ms") > 0 || median("Persist/gvisor/snapshot", "p50-ms") > 0 {
		fmt.Fprintf(&b, "\n## Saved states, end to end\n\nThrough the Go SDK against `cove server`, a sandbox holding 10 MiB in 101 files of its own; p50 ms.\n")
		fmt.Fprintf(&b, "Without memory = its files saved as a layer, its processes ended, booted again at the resume.\n\n")
		fmt.Fprintf(&b, "| figure | namespaces | gVisor | goal |\n|---|---:|---:|---:|\n")
		for _, row := range []struct{ name, label, goal string }{
			{"pause", "pause with memory", ""},
			{"resume", "resume with memory", "≤ 50 ms"},
			{"pause-files", "pause without memory (files saved)", ""},
			{"resume-files", "resume without memory (boot over the saved files)", "≤ 300 ms"},
			{"snapshot", "snapshot (the sandbox goes on)", ""},
			{"from-snapshot", "create from the snapshot → first output", ""},
			{"fork10", "fork of 10", "≤ 1 s"},
			{"resume-from-disk", "resume from disk → first output (paused long enough to be written there)", "≤ 300 ms"},
		} {
			cell := func(driver string) string {
				if v := median("Persist/"+driver+"/"+row.name, "p50-ms"); v > 0 {
					return fmt.Sprintf("%.1f", v)
				}
				return "—" // not measured: the driver has no such state
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", row.label, cell("namespaces"), cell("gvisor"), row.goal)
		}
	}
	if notes, err := os.ReadFile("bench/NOTES.md"); err == nil {
		b.WriteString("\n")
		b.Write(notes)
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func machine() string {
	var b strings.Builder
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(out))
	}
	fmt.Fprintf(&b, "kernel   %s\n", run("uname", "-srm"))
	fmt.Fprintf(&b, "cpus     %d (%s)\n", runtime.NumCPU(), run("sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"))
	fmt.Fprintf(&b, "memory   %s\n", run("sh", "-c", "grep MemTotal /proc/meminfo | tr -s ' '"))
	fmt.Fprintf(&b, "cgroups  %s\n", run("sh", "-c", "stat -fc %T /sys/fs/cgroup"))
	fmt.Fprintf(&b, "go       %s\n", runtime.Version())
	return b.String()
}

// computeSDK writes ComputeSDK's protocol (bench/js/computesdk.mjs) and
// the command's round trip beside the login shell that bounds it.
func computeSDK(b *strings.Builder, median func(name, unit string) float64, floor float64) {
	fmt.Fprintf(b, "## ComputeSDK's protocol\n\n")
	fmt.Fprintf(b, "Time to interactive = `Sandbox.create()` + `commands.run('node -v')` through the official JS SDK,\n")
	fmt.Fprintf(b, "each sandbox killed after, against `cove server` as a user starts it (its default warm pool), alone\n")
	fmt.Fprintf(b, "on the host: sequential, staggered (one started every 200 ms) and a burst (all at once); top and\n")
	fmt.Fprintf(b, "bottom 5 %% trimmed. Score = (0.6·s(p50) + 0.25·s(p95) + 0.15·s(p99)) × success, s(x) = 100·(1 − x/10 s).\n")
	fmt.Fprintf(b, "The floor is `node -v`'s round trip in a sandbox that already runs.\n\n")
	fmt.Fprintf(b, "| mode | p50 ms | p95 ms | p99 ms | success | score | wall ms |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, mode := range []string{"floor", "sequential", "staggered", "burst"} {
		name := "ComputeSDK/" + mode
		fmt.Fprintf(b, "| %s | %.2f | %.2f | %.2f | %.0f %% | %.1f | %.0f |\n", mode, median(name, "p50-ms"),
			median(name, "p95-ms"), median(name, "p99-ms"), 100*median(name, "success"), median(name, "score"), median(name, "wall-ms"))
	}
	fmt.Fprintf(b, "\n| goal | value | target |\n|---|---:|---:|\n")
	for _, mode := range []string{"sequential", "staggered", "burst"} {
		fmt.Fprintf(b, "| success, %s | %.0f %% | 100 %% |\n", mode, 100*median("ComputeSDK/"+mode, "success"))
	}
	for _, mode := range []string{"sequential", "staggered"} {
		fmt.Fprintf(b, "| %s TTI p50 − the floor | %+.1f ms | ≤ 15 ms |\n", mode, median("ComputeSDK/"+mode, "p50-ms")-floor)
	}
	fmt.Fprintf(b, "| burst of 100, wall (%d cores) | %.0f ms | ≤ 2500 ms |\n", runtime.NumCPU(), median("ComputeSDK/burst", "wall-ms"))
	// Each SDK's round trip beside the login shell timed in its own sandbox.
	if shell, rtt := median("LoginShell/go-sdk", "p50-ms"), median("ExecRTT", "p50-ms"); shell > 0 && rtt > 0 {
		fmt.Fprintf(b, "| `commands.run('true')` round trip, Go SDK (%.2f ms) / `bash -l -c true` in its sandbox (%.2f ms) | %.2f× | ≤ 1.3× |\n", rtt, shell, rtt/shell)
	}
	if shell, rtt := median("LoginShell/js-sdk", "p50-ms"), median("CommandRTT/js-sdk", "p50-ms"); shell > 0 && rtt > 0 {
		fmt.Fprintf(b, "| `commands.run('true')` round trip, official JS SDK (%.2f ms) / `bash -l -c true` in its sandbox (%.2f ms) | %.2f× | ≤ 1.3× |\n", rtt, shell, rtt/shell)
	}
	b.WriteString("\n")
}

// flood writes the API's requests per second without and with a flood of
// idle connections without a credential (bench/harness -only flood).
func flood(b *strings.Builder, median func(name, unit string) float64) {
	fmt.Fprintf(b, "## The API under a flood of idle connections\n\n")
	fmt.Fprintf(b, "`GET /v2/sandboxes` with the key, 4 clients from 127.0.0.1 for 5 s, against the pooled server,\n")
	fmt.Fprintf(b, "without a flood, then while %.0f connections from 127.0.0.2 send nothing (each opened again a second\n", median("Flood/keepalive", "flood-conns"))
	fmt.Fprintf(b, "after the server closes it; the flooding client shares the cores): held = the connections not yet\n")
	fmt.Fprintf(b, "authenticated the server held meanwhile (`--unauthenticated-per-address`), errors = requests that\n")
	fmt.Fprintf(b, "failed under the flood.\n\n")
	fmt.Fprintf(b, "| connections | without, req/s | with the flood, req/s | with / without | held | errors |\n|---|---:|---:|---:|---:|---:|\n")
	for _, mode := range []string{"keepalive", "new-connection"} {
		name := "Flood/" + mode
		quiet, flooded := median(name, "quiet-req/s"), median(name, "flood-req/s")
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.2f× | %.0f | %.0f |\n", mode, quiet, flooded, flooded/quiet, median(name, "flood-held"), median(name, "flood-errors"))
	}
	b.WriteString("\n")
}
