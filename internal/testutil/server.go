// Package testutil holds helpers shared by Cove's end-to-end tests.
package testutil

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Binary returns bin/cove of the repository (make build makes it).
func Binary(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "../../bin/cove")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make build (make test does)", bin)
	}
	return bin
}

// SandboxBinary returns bin/cove-sandbox of the repository (make build
// makes it): a sandbox's init and agent as they run in production, built
// without cgo, where a test binary is built with it.
func SandboxBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(Binary(t)), "cove-sandbox")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make build (make test does)", bin)
	}
	return bin
}

// NeedRunsc skips t when bin/runsc, which a server's gVisor driver runs
// (make test installs it), is missing.
func NeedRunsc(t testing.TB) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	if _, err := os.Stat(filepath.Join(filepath.Dir(file), "../../bin/runsc")); err != nil {
		t.Skip("bin/runsc is missing: make test installs it")
	}
}

// CheckLog fails t if a stopped server's log holds a panic, and shows the
// log when t has failed.
func CheckLog(t testing.TB, log string) {
	t.Helper()
	if strings.Contains(log, "panic") {
		t.Errorf("the server's log holds a panic")
	}
	if t.Failed() {
		t.Logf("server log:\n%s", log)
	}
}

var serverSeq atomic.Int32

// Server is a `cove server` process started for one test.
type Server struct {
	Addr    string // host:port
	URL     string // http://host:port
	DataDir string
}

// lockedBuffer is a process's log, written by the process, read by the
// test. A quiet one is not shown when the test failed (unless it holds a
// panic): a test that runs many servers shows the logs that matter itself.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	quiet bool
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// check is CheckLog of the log once its process stopped, unless it is
// quiet and holds no panic.
func (l *lockedBuffer) check(t testing.TB) {
	t.Helper()
	if log := l.String(); !l.quiet || strings.Contains(log, "panic") {
		CheckLog(t, log)
	}
}

// StartServer runs bin/cove server with apiKey (and extra flags) on a free
// loopback port and stops it (SIGINT) when the test ends; the log is shown
// if the test failed.
func StartServer(t *testing.T, apiKey string, extra ...string) Server {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cove server needs root")
	}
	return StartServerBinary(t, Binary(t), apiKey, extra...)
}

// StartServerBinary is StartServer with the cove binary at bin.
func StartServerBinary(t *testing.T, bin, apiKey string, extra ...string) Server {
	t.Helper()
	return startServerProc(t, bin, apiKey, extra).Server
}

// Proc is a `cove server` process a test can stop, cleanly or with
// SIGKILL, and start again on the same address and data directory.
type Proc struct {
	Server
	t    *testing.T
	key  string
	bin  string
	args []string
	logs *lockedBuffer
	cmd  *exec.Cmd // nil while stopped
}

// StartProc is StartServer for a test that restarts the server (Restart).
func StartProc(t *testing.T, apiKey string, extra ...string) *Proc {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cove server needs root")
	}
	return startServerProc(t, Binary(t), apiKey, extra)
}

func startServerProc(t *testing.T, bin, apiKey string, extra []string) *Proc {
	t.Helper()
	s := newServer(t)
	parent := "cove-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(int(serverSeq.Add(1)))
	p := &Proc{Server: s, t: t, key: apiKey, bin: bin, logs: &lockedBuffer{},
		args: append([]string{"server", "--listen", s.Addr, "--data-dir", s.DataDir, "--api-key", apiKey, "--cgroup-parent", parent, "--network=false", "--prepare-templates=false", "--base=host"}, extra...)}
	t.Cleanup(func() {
		killAll(s.URL, apiKey) // what a failed test left; the server keeps sandboxes on purpose
		p.stop(false)
		// Stopped with no sandbox of a user left: its warm ones went too.
		if left := allOf(s.DataDir); len(left) > 0 {
			t.Errorf("left on disk after the server stopped: %v", left)
		}
		p.logs.check(t)
	})
	p.cmd = launch(t, bin, "server", s, p.args, nil, p.logs)
	return p
}

// stop ends the server: SIGINT, or SIGKILL when kill (its sandboxes live
// on either way, for the next start to adopt).
func (p *Proc) stop(kill bool) {
	if p.cmd == nil {
		return
	}
	if kill {
		_ = p.cmd.Process.Kill()
	} else {
		_ = p.cmd.Process.Signal(os.Interrupt)
	}
	_ = p.cmd.Wait()
	p.cmd = nil
}

// Leaks lists what the stopped server left on the host: mounts under its
// data directory and groups under its cgroup parent.
func (p *Proc) Leaks() []string { return leaksOf(p.DataDir, p.args) }

// leaksOf lists the mounts under dir and the groups under the cgroup
// parent args give (--cgroup-parent).
func leaksOf(dir string, args []string) []string {
	out := MountsUnder(dir)
	if i := slices.Index(args, "--cgroup-parent"); i >= 0 && i+1 < len(args) {
		for _, g := range CgroupsUnder(args[i+1]) {
			out = append(out, "cgroup "+g)
		}
	}
	return out
}

// Log is what the server wrote so far.
func (p *Proc) Log() string { return p.logs.String() }

// Quiet keeps the server's log from being shown when the test fails
// (lockedBuffer).
func (p *Proc) Quiet() { p.logs.quiet = true }

// Shutdown kills every sandbox of the server's key and stops it (SIGINT),
// before its test ends: what a test's end does, for a test that runs
// servers one after the other.
func (p *Proc) Shutdown() {
	if p.cmd == nil {
		return
	}
	killAll(p.URL, p.key)
	p.stop(false)
}

// Restart stops the server (with SIGKILL when kill) and starts it again.
func (p *Proc) Restart(kill bool) {
	p.t.Helper()
	p.stop(kill)
	p.cmd = launch(p.t, p.bin, "server", p.Server, p.args, nil, p.logs)
}

// Leftovers lists the sandboxes of users a server's node still holds.
func (s Server) Leftovers() []string { return Leftovers(s.DataDir) }

// Leftovers lists what a node with data directory dir still holds of its
// users' sandboxes: their records and memory images under node/ and the
// driver directories of those. Warm sandboxes (a driver directory without a record) are the
// node's own; they go when it stops (allOf).
func Leftovers(dir string) []string {
	var out []string
	entries, _ := os.ReadDir(filepath.Join(dir, "node"))
	for _, e := range entries {
		// Paused sandboxes' memory images, and copies of processes a fork
		// starts from: one directory each.
		if e.Name() == "saved" || e.Name() == "images" {
			saved, _ := os.ReadDir(filepath.Join(dir, "node", e.Name()))
			for _, s := range saved {
				out = append(out, "node/"+e.Name()+"/"+s.Name())
			}
			continue
		}
		out = append(out, "node/"+e.Name())
		id := strings.TrimSuffix(e.Name(), ".json")
		for _, d := range []string{"sandboxes", "gvisor", "microvm"} {
			if _, err := os.Stat(filepath.Join(dir, d, id)); err == nil {
				out = append(out, d+"/"+id)
			}
		}
	}
	return out
}

// allOf lists every record and driver directory under dir (runsc's own
// state directory, the guests' initramfs, layer images and boot snapshots
// aside: they outlive the sandboxes).
func allOf(dir string) []string {
	var out []string
	for _, d := range []string{"node", "node/saved", "node/images", "sandboxes", "gvisor", "microvm"} {
		entries, _ := os.ReadDir(filepath.Join(dir, d))
		for _, e := range entries {
			if e.Name() != ".runsc" && e.Name() != "initramfs.cpio" && e.Name() != "_images" && e.Name() != "_snapshots" && !(d == "node" && (e.Name() == "saved" || e.Name() == "images")) {
				out = append(out, d+"/"+e.Name())
			}
		}
	}
	return out
}

// killAll kills every sandbox the key can see and deletes its volumes
// (whose mounts must not outlive the test's directory).
func killAll(url, key string) {
	deleteEach(url, key, "/v2/sandboxes", "/sandboxes/", "sandboxID")
	deleteEach(url, key, "/volumes", "/volumes/", "volumeID")
}

// deleteEach lists list and deletes each item at prefix + its field.
func deleteEach(url, key, list, prefix, field string) {
	req, _ := http.NewRequest(http.MethodGet, url+list, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var items []map[string]any
	if json.NewDecoder(resp.Body).Decode(&items) != nil {
		return
	}
	for _, it := range items {
		id, _ := it[field].(string)
		del, _ := http.NewRequest(http.MethodDelete, url+prefix+id, nil)
		del.Header.Set("X-API-Key", key)
		if r, err := http.DefaultClient.Do(del); err == nil {
			r.Body.Close()
		}
	}
}

// WaitWarm waits until a node with data directory dir holds n warm
// sandboxes (driver directories without a record) and returns their ids.
func WaitWarm(t testing.TB, dir string, n int) map[string]bool {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ids := map[string]bool{}
		entries, _ := os.ReadDir(filepath.Join(dir, "sandboxes"))
		more, _ := os.ReadDir(filepath.Join(dir, "gvisor"))
		for _, e := range append(entries, more...) {
			if e.Name() == ".runsc" {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, "node", e.Name()+".json")); os.IsNotExist(err) {
				ids[e.Name()] = true
			}
		}
		if len(ids) >= n {
			return ids
		}
	}
	t.Fatalf("the node did not reach %d warm sandboxes", n)
	return nil
}

// WaitBindImage waits until a node with data directory dir has made an
// image of a template's read-only bind (the microVM driver's: the base
// template's /usr, which its first guest starts making). The image of
// this host's /usr took from 35 s to 100 s: within is a guard.
func WaitBindImage(t testing.TB, dir string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(time.Second) {
		if made, _ := filepath.Glob(filepath.Join(dir, "microvm", "_images", "bind-*.erofs")); len(made) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no image of a read-only bind after %v", within)
		}
	}
}

// newServer is where a process a test starts listens (a loopback port
// free now) and keeps its data (a directory of the test's).
func newServer(t testing.TB) Server {
	t.Helper()
	addr := FreeAddr(t)
	return Server{Addr: addr, URL: "http://" + addr, DataDir: t.TempDir()}
}
