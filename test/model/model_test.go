// Package model_test drives random histories of sandbox operations —
// create, write files, start a process that counts in its memory, pause
// with and without memory, resume, snapshot, create from a snapshot, fork,
// kill, the timeout (which kills, or pauses with or without memory, as the
// sandbox was created to), traffic to a port of a sandbox paused with
// auto-resume, the server (a node of a cluster) stopped, cleanly or with
// SIGKILL, and started again — through the Go SDK against a real `cove
// server` (or a cluster: an API replica and two nodes), and after every
// step checks each sandbox against a simple model of it: the state the
// API reports, every file written before (byte for byte, whatever paths
// led to the running sandbox), and the counting process, which runs
// exactly while no operation dropped the sandbox's memory. Once every
// sandbox is killed nothing of them is left on the host.
//
// It runs on namespaces (60 steps; 300 in make test-long) and, in make
// test-long, on gVisor (100 steps) and microVM (40 steps), whose snapshots
// and forks carry the sandbox's processes and whose paused sandboxes go to
// disk a second after their pause, and in a cluster (100 steps); make
// test-long also replays the histories that found bugs (regressions).
//
// Each step draws from a generator of its own (the seed and the step's
// number), so that a history can be replayed without some of its steps. A
// failure prints the seed and the history, then looks for the shortest
// history that fails the same way (shrink: steps left out, each candidate
// on a fresh server, for COVE_MODEL_SHRINK at most, 5m by default) and
// prints it with the steps that make it. COVE_MODEL_SEED replays a seed,
// COVE_MODEL_STEPS sets the length, COVE_MODEL_ONLY=3,17,20 plays those
// steps alone.
package model_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	cove "github.com/covesandbox/cove/sdk/go"
)

const apiKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// counter is the counting process: its count lives in its memory and is
// written to /tmp/count; its command line carries a mark pgrep finds.
const counter = `setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done # cove-model-counter' >/dev/null 2>&1 &`

// sandbox is the model of one sandbox.
type sandbox struct {
	id       string
	state    string            // "running", "paused", "killed"
	files    map[string]string // path → content
	counting bool              // the counting process runs (or is frozen, paused with memory)
	count    int               // the last count seen
	memory   bool              // paused with its memory
	// boot is the boot id it reads (/proc/sys/kernel/random/boot_id), ""
	// when it booted since it was last seen: a new one, no other
	// sandbox's and not the host's.
	boot string
	// onTimeout is what its timeout does (a fork's is its parent's), and
	// autoResume whether traffic resumes it then.
	onTimeout  cove.OnTimeout
	autoResume bool
	// serving: its web server (on webPort, started at its create when it
	// resumes on traffic) runs, or is frozen with its memory.
	serving bool
}

// webPort is where a sandbox that resumes on traffic serves its home.
const webPort = "8000"

// snapshot is the model of a snapshot: the files of its sandbox then, and
// its counting process where snapshots carry processes.
type snapshot struct {
	id       string
	files    map[string]string
	counting bool
	count    int
	boot     string // where snapshots carry processes: its sandbox's boot id
}

type run struct {
	t         *testing.T
	host      host
	seed      uint64
	oneStream bool // one generator for the whole history (regressions found before the per-step ones)
	cur       int  // the step being played (-1: before the first, or after the last)
	failure   string
	ctx       context.Context
	c         *cove.Client
	rnd       *mrand.Rand
	sandboxes []*sandbox
	snapshots []snapshot
	history   []string
	files     int
	// carries: snapshots and forks carry the sandbox's processes (gVisor,
	// microVM).
	carries bool
	// boots: the boot ids seen, and whose.
	boots map[string]string
}

// regressions are the histories that found bugs, replayed by their seeds
// in make test-long.
var regressions = []struct {
	driver string
	seed   uint64
	steps  int
	found  string
	// oneStream: found when every step drew from one generator.
	oneStream bool
}{
	{"gvisor", 1796282298974546102, 100, "runsc's output files outlived a node killed during a runsc call", true},
}

// TestMain stops the PostgreSQL and the S3 server the cluster's histories
// started, once every test ran.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.StopPostgres()
	testutil.StopObjectStore()
	os.Exit(code)
}

func TestRandomHistories(t *testing.T) {
	long := os.Getenv("COVE_LONG") != ""
	t.Run("namespaces", func(t *testing.T) {
		history(t, map[bool]int{false: 60, true: 300}[long], 0, "namespaces", false)
	})
	t.Run("gvisor", func(t *testing.T) {
		if !long {
			t.Skip("make test-long runs it")
		}
		history(t, 100, 0, "gvisor", false)
	})
	t.Run("microvm", func(t *testing.T) {
		if !long {
			t.Skip("make test-long runs it")
		}
		history(t, 40, 0, "microvm", false)
	})
	t.Run("cluster", func(t *testing.T) {
		if !long {
			t.Skip("make test-long runs it")
		}
		history(t, 100, 0, "cluster", false)
	})
	for _, r := range regressions {
		t.Run(fmt.Sprintf("%s/%d", r.driver, r.seed), func(t *testing.T) {
			if !long {
				t.Skip("make test-long runs it")
			}
			t.Logf("found: %s", r.found)
			history(t, r.steps, r.seed, r.driver, r.oneStream)
		})
	}
}

// host is what the sandboxes run on: one cove server, or a cluster.
type host interface {
	url() string // of the API and the sandboxes' traffic
	// restart says which server (node) it stops, cleanly or killed, and
	// starts again, and does it.
	restart(rnd *mrand.Rand) (string, func())
	leftovers() []string // of users' sandboxes, on every node
	shutdown()           // every sandbox killed, every process stopped
	leaks() []string     // mounts and cgroups left once shut down
	quiet()              // its logs not shown by the test's end
	log() string
}

// server is one cove server.
type server struct{ *testutil.Proc }

func (s server) url() string         { return s.URL }
func (s server) leftovers() []string { return s.Leftovers() }
func (s server) leaks() []string     { return s.Leaks() }
func (s server) shutdown()           { s.Shutdown() }
func (s server) quiet()              { s.Quiet() }
func (s server) log() string         { return s.Log() }

func (s server) restart(rnd *mrand.Rand) (string, func()) {
	kill := rnd.IntN(2) == 0
	return map[bool]string{false: "restart the server", true: "kill the server and start it again"}[kill], func() { s.Restart(kill) }
}

// cluster is an API replica and two nodes over PostgreSQL and a bucket.
type cluster struct {
	t *testing.T
	testutil.Cluster
}

func (c cluster) url() string         { return c.APIs[0].URL }
func (c cluster) shutdown()           { c.Shutdown(apiKey) }
func (c cluster) quiet()              { c.Quiet() }
func (c cluster) log() string         { return c.Log() }
func (c cluster) leftovers() []string { return c.Leftovers() }
func (c cluster) leaks() []string     { return c.Leaks() }

func (c cluster) restart(rnd *mrand.Rand) (string, func()) {
	n, kill := rnd.IntN(len(c.Nodes)), rnd.IntN(2) == 0
	what := fmt.Sprintf("restart node %d", n+1)
	if kill {
		what = fmt.Sprintf("kill node %d and start it again", n+1)
	}
	return what, func() {
		if kill {
			c.KillNode(c.t, n)
		} else {
			c.StopNode(c.t, n)
		}
		c.RestartNode(c.t, n)
	}
}

// history drives a random history of steps (from seed; 0: a new one) on
// a server whose sandboxes run on namespaces, gvisor or microvm, or on a
// cluster (namespaces); a failing one is shrunk.
func history(t *testing.T, steps int, seed uint64, on string, oneStream bool) {
	start := func() host { return server{testutil.StartProc(t, apiKey)} }
	carries := false // snapshots and forks carry processes
	switch on {
	case "gvisor":
		testutil.NeedRunsc(t)
		runsc, _ := filepath.Abs(filepath.Join(filepath.Dir(testutil.Binary(t)), "runsc"))
		start = func() host {
			return server{testutil.StartProc(t, apiKey, "--default-isolation", "gvisor", "--runsc", runsc, "--pause-to-disk-after", "1s")}
		}
		carries = true
	case "microvm":
		start = func() host {
			p := testutil.StartProc(t, apiKey, "--default-isolation", "microvm", "--pause-to-disk-after", "1s")
			waitBindImage(t, p)
			return server{p}
		}
		carries = true
	case "cluster":
		start = func() host { return cluster{t, testutil.StartCluster(t, apiKey, testutil.Postgres(t), 1, 2)} }
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	var err error
	if s := os.Getenv("COVE_MODEL_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("COVE_MODEL_SEED: %v", err)
		}
	}
	if s := os.Getenv("COVE_MODEL_STEPS"); s != "" {
		if steps, err = strconv.Atoi(s); err != nil {
			t.Fatalf("COVE_MODEL_STEPS: %v", err)
		}
	}
	budget := 5 * time.Minute
	if s := os.Getenv("COVE_MODEL_SHRINK"); s != "" {
		if budget, err = time.ParseDuration(s); err != nil {
			t.Fatalf("COVE_MODEL_SHRINK: %v", err)
		}
	}
	only := make([]int, steps)
	for i := range only {
		only[i] = i
	}
	if s := os.Getenv("COVE_MODEL_ONLY"); s != "" {
		only = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("COVE_MODEL_ONLY: %v", err)
			}
			only = append(only, n)
		}
	}
	play := func(steps []int, within time.Duration, quiet bool) *run {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		r := &run{t: t, ctx: ctx, seed: seed, oneStream: oneStream, carries: carries}
		r.play(start, steps, quiet)
		return r
	}
	first := play(only, 10*time.Minute, false)
	t.Logf("seed %d (COVE_MODEL_SEED=%d replays it); the history:\n  %s", seed, seed, strings.Join(first.history, "\n  "))
	if first.failure == "" {
		return
	}
	if oneStream || budget <= 0 {
		t.Fatal(first.failure)
	}
	failed := first.played()
	deadline := time.Now().Add(budget)
	var shortest *run
	failed = shrink(failed, deadline, func(steps []int) bool {
		r := play(steps, time.Until(deadline), true)
		if r.failure != "" && sameFailure(r.failure, first.failure) {
			shortest = r
			return true
		}
		return false
	})
	if shortest == nil {
		t.Fatalf("%s\n(no shorter history failed the same way within %v)", first.failure, budget)
	}
	t.Fatalf("%s\nthe shortest history found that fails the same way (COVE_MODEL_SEED=%d COVE_MODEL_ONLY=%s):\n  %s\nit fails with: %s\nits server's log:\n%s",
		first.failure, seed, joinInts(failed), strings.Join(shortest.history, "\n  "), shortest.failure, shortest.host.log())
}

// waitBindImage has a microVM server make its image of the host's /usr,
// which its first guest starts: the guests after it boot from that image
// and can then be written to disk and forked with their processes (the
// first shares /usr over virtiofs, and is killed).
func waitBindImage(t *testing.T, p *testutil.Proc) {
	t.Helper()
	c, err := cove.NewClient(cove.WithAPIURL(p.URL), cove.WithSandboxURL(p.URL), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	first, err := c.Create(ctx, cove.CreateOptions{Timeout: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitBindImage(t, p.DataDir, 8*time.Minute)
	if err := c.Kill(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
}

// play runs steps (their numbers) on a server of its own, and stops the
// server; a failure ends it, in r.failure.
// A quiet one's server log is not shown by the test's end.
func (r *run) play(start func() host, steps []int, quiet bool) {
	r.host = start()
	if quiet {
		r.host.quiet()
	}
	defer r.host.shutdown()
	c, err := cove.NewClient(cove.WithAPIURL(r.host.url()), cove.WithSandboxURL(r.host.url()), cove.WithAPIKey(apiKey))
	if err != nil {
		r.t.Fatal(err)
	}
	r.c = c
	defer func() {
		if v := recover(); v != nil && v != errStopped {
			panic(v)
		}
	}()
	r.at(-1)
	r.create()
	r.check()
	for _, i := range steps {
		r.at(i)
		r.step()
		r.check()
	}
	r.at(-1)
	for _, sb := range r.sandboxes {
		if sb.state != "killed" {
			r.do("kill "+sb.id, func() error { return c.Kill(r.ctx, sb.id) })
			sb.state = "killed"
		}
	}
	r.check()
	for _, s := range r.snapshots {
		r.do("delete snapshot "+s.id, func() error { return c.DeleteSnapshot(r.ctx, s.id) })
	}
	if left := r.host.leftovers(); len(left) > 0 {
		r.fail("left on the host once every sandbox was killed: %v", left)
	}
	r.host.shutdown()
	if left := r.host.leaks(); len(left) > 0 {
		r.fail("left on the host once the server stopped: %v", left)
	}
}

// at starts step i (-1: before the first step, or after the last): its
// own generator, unless the whole history draws from one.
func (r *run) at(i int) {
	r.cur = i
	switch {
	case r.oneStream && r.rnd == nil:
		r.rnd = mrand.New(mrand.NewPCG(r.seed, r.seed^0x5eed))
	case !r.oneStream:
		r.rnd = mrand.New(mrand.NewPCG(r.seed, uint64(i+1)))
	}
}

// played are the numbers of the steps played up to the failure (all of
// them when it came after the last).
func (r *run) played() []int {
	var out []int
	for _, l := range r.history {
		var n int
		if _, err := fmt.Sscanf(l, "%d ", &n); err == nil && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// errStopped ends a run at its failure.
var errStopped = errors.New("the run failed")

// fail records the run's failure and ends it.
func (r *run) fail(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	panic(errStopped)
}

// do runs one operation, recorded in the history with its step's number;
// a failure ends the run.
func (r *run) do(what string, op func() error) {
	step := "  -"
	if r.cur >= 0 {
		step = fmt.Sprintf("%3d", r.cur)
	}
	r.history = append(r.history, step+" "+what)
	if err := op(); err != nil {
		r.fail("%s: %v", what, err)
	}
}

// shrink looks for a shorter list of steps for which fails holds, until
// deadline: it leaves out runs of steps, halving their length, and keeps
// any list that still fails (a simple delta debugging).
func shrink(steps []int, deadline time.Time, fails func([]int) bool) []int {
	for n := len(steps) / 2; n >= 1; n /= 2 {
		for i := 0; i < len(steps) && time.Now().Before(deadline); {
			try := slices.Concat(steps[:i], steps[min(i+n, len(steps)):])
			if len(try) < len(steps) && fails(try) {
				steps = try
				continue
			}
			i += n
		}
	}
	return steps
}

// sameFailure reports whether two failures are the same but for the ids,
// counts and sizes in them.
func sameFailure(a, b string) bool {
	return normalize.ReplaceAllString(a, "#") == normalize.ReplaceAllString(b, "#")
}

var normalize = regexp.MustCompile(`[a-z0-9]{16,}|[0-9]+`)

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// pick returns a random sandbox in state ("" when none).
func (r *run) pick(state string) *sandbox {
	var in []*sandbox
	for _, sb := range r.sandboxes {
		if sb.state == state {
			in = append(in, sb)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return in[r.rnd.IntN(len(in))]
}

func (r *run) live() int {
	n := 0
	for _, sb := range r.sandboxes {
		if sb.state != "killed" {
			n++
		}
	}
	return n
}

// step runs one operation its state allows, chosen at random.
func (r *run) step() {
	for {
		running, paused := r.pick("running"), r.pick("paused")
		switch r.rnd.IntN(13) {
		case 0:
			if r.live() < 3 {
				r.create()
				return
			}
		case 1, 2:
			if running != nil {
				r.write(running)
				return
			}
		case 3:
			if running != nil && !running.counting {
				r.startCounting(running)
				return
			}
		case 4:
			if running != nil {
				r.pause(running, r.rnd.IntN(2) == 0)
				return
			}
		case 5:
			if paused != nil {
				r.resume(paused)
				return
			}
		case 6:
			if running != nil && len(r.snapshots) < 2 {
				r.snapshot(running)
				return
			}
		case 7:
			if len(r.snapshots) > 0 && r.live() < 3 {
				r.fromSnapshot(r.snapshots[r.rnd.IntN(len(r.snapshots))])
				return
			}
		case 8:
			if running != nil && r.live() < 3 {
				r.fork(running)
				return
			}
		case 9:
			if sb := r.pick([]string{"running", "paused"}[r.rnd.IntN(2)]); sb != nil && r.live() > 1 {
				r.do("kill "+sb.id, func() error { return r.c.Kill(r.ctx, sb.id) })
				sb.state = "killed"
				return
			}
		case 11:
			if running != nil && (running.onTimeout != cove.OnTimeoutKill || r.live() > 1) {
				r.timeout(running)
				return
			}
		case 12:
			for _, sb := range r.sandboxes {
				if sb.state == "paused" && sb.memory && sb.autoResume && sb.serving {
					r.wake(sb)
					return
				}
			}
		case 10:
			// The server (a node of a cluster) stops, cleanly or killed,
			// and starts again: it adopts its sandboxes as they were,
			// processes and all.
			what, restart := r.host.restart(r.rnd)
			r.do(what, func() error {
				restart()
				return nil
			})
			return
		}
	}
}

func (r *run) add(what string, s *cove.Sandbox, files map[string]string, onTimeout cove.OnTimeout, autoResume bool) *sandbox {
	r.history[len(r.history)-1] += " → " + s.ID
	sb := &sandbox{id: s.ID, state: "running", files: clone(files), onTimeout: onTimeout, autoResume: autoResume}
	r.sandboxes = append(r.sandboxes, sb)
	return sb
}

var onTimeoutNames = map[cove.OnTimeout]string{cove.OnTimeoutKill: "", cove.OnTimeoutPause: " (paused at its timeout)",
	cove.OnTimeoutPauseFiles: " (paused without memory at its timeout)"}

func (r *run) create() {
	var s *cove.Sandbox
	on := cove.OnTimeout(r.rnd.IntN(3))
	resume := on == cove.OnTimeoutPause && r.rnd.IntN(2) == 0
	what := "create" + onTimeoutNames[on]
	if resume {
		what += " (serving on " + webPort + ", resumed by traffic)"
	}
	r.do(what, func() (err error) {
		s, err = r.c.Create(r.ctx, cove.CreateOptions{Timeout: 10 * time.Minute, OnTimeout: on, AutoResume: resume})
		if err == nil && resume {
			_, err = s.Commands.Run(r.ctx, "setsid python3 -m http.server "+webPort+" --directory /home/user >/dev/null 2>&1 &"+
				" for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/"+webPort+") 2>/dev/null && exit 0; sleep 0.1; done; exit 1")
		}
		return err
	})
	sb := r.add(what, s, nil, on, resume)
	sb.serving = resume
}

// wake sends a request to the web server of a sandbox paused with its
// memory and auto-resume: it resumes, and the server answers.
func (r *run) wake(sb *sandbox) {
	r.do("traffic to "+sb.id, func() error {
		req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.host.url()+"/", nil)
		if err != nil {
			return err
		}
		req.Header.Set("E2b-Sandbox-Id", sb.id)
		req.Header.Set("E2b-Sandbox-Port", webPort)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})
	sb.state = "running"
}

// timeout brings a sandbox's timeout to 1 s and waits for what it does:
// the sandbox killed, or paused with or without its memory.
func (r *run) timeout(sb *sandbox) {
	want := map[cove.OnTimeout]string{cove.OnTimeoutKill: "killed", cove.OnTimeoutPause: "paused", cove.OnTimeoutPauseFiles: "paused"}[sb.onTimeout]
	r.do("time out "+sb.id, func() error {
		if err := r.sandboxOf(sb).SetTimeout(r.ctx, time.Second); err != nil {
			return err
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			info, err := r.c.Info(r.ctx, sb.id)
			switch {
			case want == "killed" && errors.Is(err, cove.ErrNotFound), err == nil && info.State == want:
				return nil
			case time.Now().After(deadline):
				return fmt.Errorf("a minute after a timeout of 1 s: %+v (%v), want %s", info, err, want)
			}
		}
	})
	sb.state = want
	sb.memory = sb.onTimeout == cove.OnTimeoutPause
}

func (r *run) write(sb *sandbox) {
	r.files++
	path := fmt.Sprintf("/home/user/f%d", r.files)
	var b [16]byte
	_, _ = rand.Read(b[:])
	content := hex.EncodeToString(b[:]) + "\n" + strings.Repeat("x", r.rnd.IntN(64<<10))
	r.do("write "+path+" in "+sb.id, func() error {
		return r.sandboxOf(sb).Files.WriteFile(r.ctx, path, []byte(content))
	})
	sb.files[path] = content
}

func (r *run) startCounting(sb *sandbox) {
	r.do("start counting in "+sb.id, func() error {
		_, err := r.sandboxOf(sb).Commands.Run(r.ctx, counter)
		return err
	})
	sb.counting, sb.count = true, 0
}

func (r *run) pause(sb *sandbox, memory bool) {
	if memory {
		r.do("pause "+sb.id, func() error { return r.c.Pause(r.ctx, sb.id) })
	} else {
		r.do("pause without memory "+sb.id, func() error { return r.c.PauseWithoutMemory(r.ctx, sb.id) })
	}
	sb.state, sb.memory = "paused", memory
}

func (r *run) resume(sb *sandbox) {
	r.do("resume "+sb.id, func() error {
		_, err := r.c.Connect(r.ctx, sb.id, 10*time.Minute)
		return err
	})
	sb.state = "running"
	if !sb.memory { // booted again from its files
		sb.counting, sb.count, sb.serving, sb.boot = false, 0, false, ""
	}
}

func (r *run) snapshot(sb *sandbox) {
	var snap cove.Snapshot
	r.do("snapshot "+sb.id, func() (err error) {
		snap, err = r.c.CreateSnapshot(r.ctx, sb.id, "")
		return err
	})
	r.history[len(r.history)-1] += " → " + snap.ID
	s := snapshot{id: snap.ID, files: clone(sb.files)}
	if r.carries {
		s.counting, s.count, s.boot = sb.counting, sb.count, sb.boot
	}
	r.snapshots = append(r.snapshots, s)
}

func (r *run) fromSnapshot(snap snapshot) {
	var s *cove.Sandbox
	r.do("create from "+snap.id, func() (err error) {
		s, err = r.c.Create(r.ctx, cove.CreateOptions{Template: snap.id, Timeout: 10 * time.Minute})
		return err
	})
	sb := r.add("create from "+snap.id, s, snap.files, cove.OnTimeoutKill, false) // its files, and its processes if carried
	sb.counting, sb.count, sb.boot = snap.counting, snap.count, snap.boot
}

func (r *run) fork(sb *sandbox) {
	var kids []*cove.Sandbox
	r.do("fork "+sb.id, func() (err error) {
		kids, err = r.c.Fork(r.ctx, sb.id, 1, 10*time.Minute)
		if err == nil && len(kids) != 1 {
			err = fmt.Errorf("%d sandboxes, want 1", len(kids))
		}
		return err
	})
	kid := r.add("fork "+sb.id, kids[0], sb.files, sb.onTimeout, sb.autoResume) // its files, and its processes if carried
	if r.carries {
		kid.counting, kid.count, kid.serving, kid.boot = sb.counting, sb.count, sb.serving, sb.boot
	}
}

// sandboxOf is the SDK's handle of a running sandbox.
func (r *run) sandboxOf(sb *sandbox) *cove.Sandbox {
	s, err := r.c.Connect(r.ctx, sb.id, 10*time.Minute)
	if err != nil {
		r.fail("connect to running %s: %v", sb.id, err)
	}
	return s
}

// check compares every sandbox with its model.
func (r *run) check() {
	for _, sb := range r.sandboxes {
		info, err := r.c.Info(r.ctx, sb.id)
		if sb.state == "killed" {
			if !errors.Is(err, cove.ErrNotFound) {
				r.fail("%s, killed: %+v %v, want not found", sb.id, info, err)
			}
			continue
		}
		if err != nil || info.State != sb.state {
			r.fail("%s: the API says %q (%v), the model %q", sb.id, info.State, err, sb.state)
		}
		if sb.state == "running" {
			r.checkRunning(sb)
		}
	}
}

func (r *run) checkRunning(sb *sandbox) {
	s := r.sandboxOf(sb)
	for path, want := range sb.files {
		got, err := s.Files.ReadFile(r.ctx, path)
		if err != nil || string(got) != want {
			r.fail("%s's %s: %d bytes (%v), want the %d written", sb.id, path, len(got), err, len(want))
		}
	}
	res, err := s.Commands.Run(r.ctx, "pgrep -f 'cove-model-[c]ounter' | wc -l; cat /tmp/count 2>/dev/null || echo 0; cat /proc/sys/kernel/random/boot_id")
	if err != nil {
		r.fail("%s: look at the counting process: %v", sb.id, err)
	}
	out := strings.Fields(res.Stdout)
	if len(out) != 3 {
		r.fail("%s: counting process %q", sb.id, res.Stdout)
	}
	r.checkBoot(sb, out[2])
	running := out[0] != "0"
	if running != sb.counting {
		r.fail("%s: the counting process runs: %v, the model says %v", sb.id, running, sb.counting)
	}
	if !sb.counting {
		return
	}
	// It goes on from its count (its memory kept), and counts.
	n, _ := strconv.Atoi(out[1])
	if n < sb.count {
		r.fail("%s: the count went back from %d to %d", sb.id, sb.count, n)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := s.Commands.Run(r.ctx, "cat /tmp/count")
		m, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		if err == nil && m > n {
			sb.count = m
			return
		}
		if time.Now().After(deadline) {
			r.fail("%s: the count stands at %d (%v)", sb.id, m, err)
		}
	}
}

// checkBoot compares the boot id a running sandbox reads with its model:
// the one it read before, or a new one after a boot.
func (r *run) checkBoot(sb *sandbox, id string) {
	if sb.boot != "" {
		if id != sb.boot {
			r.fail("%s: boot id %s, the model says %s (no boot since)", sb.id, id, sb.boot)
		}
		return
	}
	if r.boots == nil {
		host, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
		r.boots = map[string]string{strings.TrimSpace(string(host)): "the host"}
	}
	if other, ok := r.boots[id]; ok {
		r.fail("%s: booted with boot id %s, %s's", sb.id, id, other)
	}
	r.boots[id], sb.boot = sb.id, id
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestShrink: the shrinking finds the steps a failure needs, and tells
// failures apart by their words, not their ids and numbers.
func TestShrink(t *testing.T) {
	all := make([]int, 60)
	for i := range all {
		all[i] = i
	}
	for _, need := range [][]int{{3, 17}, {0}, {59}, {10, 11, 12, 40}} {
		tries := 0
		got := shrink(all, time.Now().Add(time.Minute), func(steps []int) bool {
			tries++
			for _, n := range need {
				if !slices.Contains(steps, n) {
					return false
				}
			}
			return true
		})
		if !slices.Equal(got, need) {
			t.Errorf("needing %v: shrunk to %v", need, got)
		}
		if tries > 120 {
			t.Errorf("needing %v: %d candidates played", need, tries)
		}
	}
	if got := shrink(all, time.Now().Add(-time.Second), func([]int) bool { return true }); len(got) != len(all) {
		t.Errorf("past its deadline: shrunk to %d steps", len(got))
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"i3x9kq0b2c7d1m4n8p5r: the API says \"paused\" (<nil>), the model \"running\"", "a8b7c6d5e4f3g2h1i0jk: the API says \"paused\" (<nil>), the model \"running\"", true},
		{"i3x9kq0b2c7d1m4n8p5r's /home/user/f12: 10 bytes (<nil>), want the 200 written", "a8b7c6d5e4f3g2h1i0jk's /home/user/f3: 0 bytes (<nil>), want the 7 written", true},
		{"the count went back from 5 to 2", "the counting process runs: false, the model says true", false},
	} {
		if got := sameFailure(c.a, c.b); got != c.same {
			t.Errorf("%q and %q: same %v, want %v", c.a, c.b, got, c.same)
		}
	}
}
