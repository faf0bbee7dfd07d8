package security_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// coveProc is a `cove server` process a test can kill and start again on
// the same data directory and address.
type coveProc struct {
	t       testing.TB
	srv     testutil.Server
	args    []string
	cgroup  string // the cgroup parent (under the test's own cgroup)
	nofile  int    // when above 0, its descriptor limit (soft and hard)
	prefix  string // its sandboxes' host-side veth names start with this, "" without networks
	mu      sync.Mutex
	logs    bytes.Buffer
	cmd     *exec.Cmd
	started time.Time
}

var procSeq int

// newCove prepares a server on a free loopback port with a data directory
// of dataDir ("" for a temporary one) and starts it. At cleanup it kills
// every sandbox, stops the server and checks that nothing is left: records,
// sandbox directories, mounts, cgroups, processes, veths.
func newCove(t testing.TB, dataDir string, extra ...string) *coveProc {
	t.Helper()
	p := prepareCove(t, dataDir, extra...)
	p.start()
	return p
}

// prepareCove is newCove but for the start, for a test to set more of
// the process.
func prepareCove(t testing.TB, dataDir string, extra ...string) *coveProc {
	t.Helper()
	testkit.NeedRoot(t, "cove server needs root")
	addr := testutil.FreeAddr(t)
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	procSeq++
	p := &coveProc{t: t, srv: testutil.Server{Addr: addr, URL: "http://" + addr, DataDir: dataDir},
		cgroup: fmt.Sprintf("cove-sec-%d-%d", os.Getpid(), procSeq)}
	p.args = append([]string{"server", "--listen", addr, "--data-dir", dataDir, "--api-key", apiKey, "--cgroup-parent", p.cgroup, "--prepare-templates=false", "--base=host"}, extra...)
	t.Cleanup(p.cleanup)
	return p
}

func (p *coveProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

// start runs the server and waits until its API answers; it returns how
// long that took from the process's start.
func (p *coveProc) start() time.Duration {
	p.t.Helper()
	p.cmd = exec.Command(testutil.Binary(p.t), p.args...)
	if p.nofile > 0 { // prlimit sets it, then becomes the server
		n := strconv.Itoa(p.nofile)
		p.cmd = exec.Command("prlimit", append([]string{"--nofile=" + n + ":" + n, "--", testutil.Binary(p.t)}, p.args...)...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if resp, err := http.Get(p.srv.URL + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return time.Since(p.started)
			}
		}
	}
	p.t.Fatalf("cove server did not answer on %s", p.srv.Addr)
	return 0
}

// crash kills the server with SIGKILL: its sandboxes keep running.
func (p *coveProc) crash() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// stop ends the server as an operator would (SIGINT).
func (p *coveProc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.t.Errorf("cove server did not stop on SIGINT")
		p.crash()
	}
}

func (p *coveProc) cleanup() {
	t := p.t
	if p.cmd != nil && p.cmd.ProcessState == nil {
		killAllSandboxes(p.srv.URL)
		p.stop()
	}
	// The kernel removes a dead namespace's veths in the background.
	var leaks []string
	testkit.Wait(20*time.Second, func() bool { leaks = p.leaks(); return len(leaks) == 0 })
	for _, leak := range leaks {
		t.Errorf("left after the server stopped: %s", leak)
	}
	p.mu.Lock()
	log := p.logs.String()
	p.mu.Unlock()
	testutil.CheckLog(t, log)
}

// leaks lists what the server's sandboxes left on the host.
func (p *coveProc) leaks() []string {
	var out []string
	out = append(out, p.srv.Leftovers()...)
	if entries, _ := os.ReadDir(filepath.Join(p.srv.DataDir, "sandboxes")); len(entries) > 0 {
		for _, e := range entries {
			out = append(out, "sandboxes/"+e.Name())
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], p.srv.DataDir+"/") {
			out = append(out, "mount "+f[4])
		}
	}
	filepath.WalkDir("/sys/fs/cgroup", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if d.Name() == p.cgroup {
			if entries, _ := os.ReadDir(path); hasDir(entries) {
				out = append(out, "cgroup "+path)
			}
			return filepath.SkipDir
		}
		if strings.Count(path, "/") > 8 {
			return filepath.SkipDir
		}
		return nil
	})
	for _, pid := range sandboxPIDs(p.cgroup) {
		out = append(out, "process "+strconv.Itoa(pid))
	}
	if p.prefix != "" {
		links, _ := netlink.LinkList()
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, p.prefix) {
				out = append(out, "veth "+l.Attrs().Name)
			}
		}
	}
	return out
}

func hasDir(entries []os.DirEntry) bool {
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// sandboxPIDs lists the processes in cgroups under parent.
func sandboxPIDs(parent string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cgroup")
		if err != nil || !strings.Contains(string(b), "/"+parent+"/") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killAllSandboxes kills every sandbox apiKey can see on the server at url
// (what a failed test left: the server keeps sandboxes when it stops).
func killAllSandboxes(url string) {
	c, err := cove.NewClient(cove.WithAPIURL(url), cove.WithSandboxURL(url), cove.WithAPIKey(apiKey))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, err := c.List(ctx, cove.ListOptions{})
	if err != nil {
		return
	}
	for _, s := range list {
		c.Kill(ctx, s.ID)
	}
}
