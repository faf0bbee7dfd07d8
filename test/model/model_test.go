// Package model_test drives random histories of sandbox operations —
// create, write files, start a process that counts in its memory, pause
// with and without memory, resume, snapshot, create from a snapshot, fork,
// kill, the timeout (which kills, or pauses with or without memory, as the
// sandbox was created to), traffic to a port of a sandbox paused with
// auto-resume, the server stopped (cleanly or with SIGKILL) and started
// again —
// through the Go SDK against a real `cove server`, and after every
// step checks each sandbox against a simple model of it: the state the
// API reports, every file written before (byte for byte, whatever paths
// led to the running sandbox), and the counting process, which runs
// exactly while no operation dropped the sandbox's memory. Once every
// sandbox is killed nothing of them is left on the host.
//
// It runs on namespaces (60 steps; 300 in make test-long) and, in make
// test-long, on gVisor (100 steps), whose snapshots and forks carry the
// sandbox's processes and whose paused sandboxes go to disk a second after
// their pause; make test-long also replays the histories that found bugs
// (regressions). A failure prints the seed and the history;
// COVE_MODEL_SEED replays one, COVE_MODEL_STEPS sets the length.
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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
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
}

type run struct {
	t         *testing.T
	srv       *testutil.Proc
	ctx       context.Context
	c         *cove.Client
	rnd       *mrand.Rand
	sandboxes []*sandbox
	snapshots []snapshot
	history   []string
	files     int
	// carries: snapshots and forks carry the sandbox's processes (gVisor).
	carries bool
}

// regressions are the histories that found bugs, replayed by their seeds
// in make test-long.
var regressions = []struct {
	driver string
	seed   uint64
	steps  int
	found  string
}{
	{"gvisor", 1796282298974546102, 100, "runsc's output files outlived a node killed during a runsc call"},
}

func TestRandomHistories(t *testing.T) {
	long := os.Getenv("COVE_LONG") != ""
	t.Run("namespaces", func(t *testing.T) {
		history(t, map[bool]int{false: 60, true: 300}[long], 0, "namespaces")
	})
	t.Run("gvisor", func(t *testing.T) {
		if !long {
			t.Skip("make test-long runs it")
		}
		history(t, 100, 0, "gvisor")
	})
	for _, r := range regressions {
		t.Run(fmt.Sprintf("%s/%d", r.driver, r.seed), func(t *testing.T) {
			if !long {
				t.Skip("make test-long runs it")
			}
			t.Logf("found: %s", r.found)
			history(t, r.steps, r.seed, r.driver)
		})
	}
}

// history drives a random history of steps (from seed; 0: a new one) on
// a server whose sandboxes run on driver.
func history(t *testing.T, steps int, seed uint64, driver string) {
	var args []string
	carries := false // snapshots and forks carry processes
	if driver == "gvisor" {
		testutil.NeedRunsc(t)
		runsc, _ := filepath.Abs(filepath.Join(filepath.Dir(testutil.Binary(t)), "runsc"))
		args, carries = []string{"--default-isolation", "gvisor", "--runsc", runsc, "--pause-to-disk-after", "1s"}, true
	}
	srv := testutil.StartProc(t, apiKey, args...)
	c, err := cove.NewClient(cove.WithAPIURL(srv.URL), cove.WithSandboxURL(srv.URL), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := &run{t: t, srv: srv, ctx: ctx, c: c, rnd: mrand.New(mrand.NewPCG(seed, seed^0x5eed)), carries: carries}
	t.Cleanup(func() { // shown on a failure, and with -v
		t.Logf("seed %d (COVE_MODEL_SEED=%d replays it); the history:\n  %s", seed, seed, strings.Join(r.history, "\n  "))
	})
	r.create()
	for range steps {
		r.step()
		r.check()
	}
	for _, sb := range r.sandboxes {
		if sb.state != "killed" {
			r.do("kill "+sb.id, func() error { return c.Kill(ctx, sb.id) })
			sb.state = "killed"
		}
	}
	r.check()
	for _, s := range r.snapshots {
		if err := c.DeleteSnapshot(ctx, s.id); err != nil {
			t.Errorf("delete snapshot %s: %v", s.id, err)
		}
	}
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("left on the host once every sandbox was killed: %v", left)
	}
}

// do runs one operation, recorded in the history; a failure ends the run.
func (r *run) do(what string, op func() error) {
	r.t.Helper()
	r.history = append(r.history, what)
	if err := op(); err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
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
	r.t.Helper()
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
			// The server stops, cleanly or killed, and starts again: it
			// adopts its sandboxes as they were, processes and all.
			kill := r.rnd.IntN(2) == 0
			r.do(map[bool]string{false: "restart the server", true: "kill the server and start it again"}[kill], func() error {
				r.srv.Restart(kill)
				return nil
			})
			return
		}
	}
}

func (r *run) add(what string, s *cove.Sandbox, files map[string]string, onTimeout cove.OnTimeout, autoResume bool) *sandbox {
	r.history[len(r.history)-1] = what + " → " + s.ID
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
		req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.srv.URL+"/", nil)
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
		sb.counting, sb.count, sb.serving = false, 0, false
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
		s.counting, s.count = sb.counting, sb.count
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
	sb.counting, sb.count = snap.counting, snap.count
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
		kid.counting, kid.count, kid.serving = sb.counting, sb.count, sb.serving
	}
}

// sandboxOf is the SDK's handle of a running sandbox.
func (r *run) sandboxOf(sb *sandbox) *cove.Sandbox {
	r.t.Helper()
	s, err := r.c.Connect(r.ctx, sb.id, 10*time.Minute)
	if err != nil {
		r.t.Fatalf("connect to running %s: %v", sb.id, err)
	}
	return s
}

// check compares every sandbox with its model.
func (r *run) check() {
	r.t.Helper()
	for _, sb := range r.sandboxes {
		info, err := r.c.Info(r.ctx, sb.id)
		if sb.state == "killed" {
			if !errors.Is(err, cove.ErrNotFound) {
				r.t.Fatalf("%s, killed: %+v %v, want not found", sb.id, info, err)
			}
			continue
		}
		if err != nil || info.State != sb.state {
			r.t.Fatalf("%s: the API says %q (%v), the model %q", sb.id, info.State, err, sb.state)
		}
		if sb.state == "running" {
			r.checkRunning(sb)
		}
	}
}

func (r *run) checkRunning(sb *sandbox) {
	r.t.Helper()
	s := r.sandboxOf(sb)
	for path, want := range sb.files {
		got, err := s.Files.ReadFile(r.ctx, path)
		if err != nil || string(got) != want {
			r.t.Fatalf("%s's %s: %d bytes (%v), want the %d written", sb.id, path, len(got), err, len(want))
		}
	}
	res, err := s.Commands.Run(r.ctx, "pgrep -f 'cove-model-[c]ounter' | wc -l; cat /tmp/count 2>/dev/null || echo 0")
	if err != nil {
		r.t.Fatalf("%s: look at the counting process: %v", sb.id, err)
	}
	out := strings.Fields(res.Stdout)
	if len(out) != 2 {
		r.t.Fatalf("%s: counting process %q", sb.id, res.Stdout)
	}
	running := out[0] != "0"
	if running != sb.counting {
		r.t.Fatalf("%s: the counting process runs: %v, the model says %v", sb.id, running, sb.counting)
	}
	if !sb.counting {
		return
	}
	// It goes on from its count (its memory kept), and counts.
	n, _ := strconv.Atoi(out[1])
	if n < sb.count {
		r.t.Fatalf("%s: the count went back from %d to %d", sb.id, sb.count, n)
	}
	testkit.Eventually(r.t, 30*time.Second, func() error {
		res, err := s.Commands.Run(r.ctx, "cat /tmp/count")
		m, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		if err != nil || m <= n {
			return fmt.Errorf("%s: the count stands at %d (%v)", sb.id, m, err)
		}
		sb.count = m
		return nil
	})
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
