package microvm

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestCheckpointRestore saves a running guest whole and brings it back: a
// process goes on where it was (the same loop, its count from memory),
// the sandbox's files are there, its end in between is reported as a
// checkpoint, its clock is the host's again, and nothing is left after
// Destroy. The guest's root is an image template's: no bind.
func TestCheckpointRestore(t *testing.T) {
	cfg, _ := testDriver(t)
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := isolationtest.NewID()
	spec := isolation.Spec{
		RootFS: isolation.RootFS{Layers: []string{testutil.ProgramsRoot(t, "bash", "cat", "sleep", "date")}},
		Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 128, DiskMB: 64, PIDs: 64},
	}
	t.Cleanup(func() { // after the destroy
		if len(d.held) != 0 {
			t.Errorf("namespaces held after Destroy: %v", d.held)
		}
	})
	c := createGuest(t, ctx, d, id, spec)
	startLoop(t, ctx, c, "echo kept > /tmp/file")
	state := func() (string, int) { t.Helper(); return loopState(t, ctx, c) }
	x, before := state()
	image := t.TempDir()
	start := time.Now()
	if err := d.Checkpoint(ctx, id, image); err != nil {
		t.Fatal(err)
	}
	var saved unix.Stat_t
	if err := unix.Stat(filepath.Join(image, memoryImage), &saved); err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint in %v: %d MiB (%d MiB on disk)", time.Since(start).Round(time.Millisecond), saved.Size>>20, saved.Blocks*512>>20)
	if exit, err := d.Wait(ctx, id); err != nil || exit.Reason != isolation.ExitCheckpointed {
		t.Errorf("end at the checkpoint: %+v %v", exit, err)
	}
	if out, _ := exec.Command("pgrep", "-f", d.dir(id)).Output(); len(out) > 0 {
		t.Errorf("QEMU runs after the checkpoint: %s", out)
	}
	time.Sleep(4 * time.Second) // the guest's clock stands still meanwhile
	start = time.Now()
	if _, err := d.Restore(ctx, id, image, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore in %v", time.Since(start).Round(time.Millisecond))
	// The same loop goes on: its mark, and a count past the one before.
	y, after := state()
	if y != x || after < before {
		t.Errorf("the loop before the checkpoint: %s %d; after the restore: %s %d", x, before, y, after)
	}
	res, err := c.Run(ctx, "root", "cat /tmp/file; date +%s", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	file, clock, _ := strings.Cut(string(res.Stdout), "\n")
	if file != "kept" {
		t.Errorf("a file after the restore: %q", file)
	}
	if secs, err := strconv.ParseInt(strings.TrimSpace(clock), 10, 64); err != nil || time.Since(time.Unix(secs, 0)).Abs() > 2*time.Second {
		t.Errorf("the guest's clock after the restore: %q, the host's %v", clock, time.Now())
	}
	// Saved again, it is restored by a node that was upgraded meanwhile:
	// a new driver over the same directory, from what is on disk, with
	// another sandbox binary, so another initramfs than the guest booted
	// (QEMU reads it only at a boot).
	again := t.TempDir()
	if err := d.Checkpoint(ctx, id, again); err != nil {
		t.Fatal(err)
	}
	upgraded := cfg
	bin, err := os.ReadFile(cfg.SandboxBinary)
	if err != nil {
		t.Fatal(err)
	}
	upgraded.SandboxBinary = filepath.Join(t.TempDir(), "cove-sandbox")
	if err := os.WriteFile(upgraded.SandboxBinary, append(bin, make([]byte, 1<<20)...), 0o755); err != nil {
		t.Fatal(err)
	}
	restarted, err := NewDriver(upgraded)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Restore(ctx, id, again, nil); err != nil {
		t.Fatal(err)
	}
	if z, n := loopState(t, ctx, guestAgent(t, restarted, id)); z != x || n < after {
		t.Errorf("the loop after a restore by a new driver: %s %d, before it: %s %d", z, n, x, after)
	}
}

// TestRestoreInAnotherNamespace restores a guest saved in one of the
// pool's namespaces into another (a node that restarted meanwhile has
// new ones): the guest moves to the new sandbox address, and its
// connections out come from it.
func TestRestoreInAnotherNamespace(t *testing.T) {
	cfg, _ := testDriver(t)
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	octet := byte(100 + os.Getpid()%100)
	gw1, addr1 := net.IPv4(10, 252, octet, 1), net.IPv4(10, 252, octet, 2)
	gw2, addr2 := net.IPv4(10, 253, octet, 1), net.IPv4(10, 253, octet, 2)
	tag := strconv.Itoa(os.Getpid() % 100000)
	ns1 := poolNamespace(t, "cvma"+tag, gw1, addr1)
	ns2 := poolNamespace(t, "cvmb"+tag, gw2, addr2)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	id := isolationtest.NewID()
	spec := isolation.Spec{
		RootFS: isolation.RootFS{Layers: []string{testutil.ProgramsRoot(t, "bash")}},
		Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 128, DiskMB: 64, PIDs: 64}, NetNS: ns1,
	}
	c := createGuest(t, ctx, d, id, spec)
	// from dials the host's end of the namespace from the guest and
	// returns the address the connection came from.
	from := func(gw net.IP) string {
		t.Helper()
		ln, err := net.Listen("tcp", net.JoinHostPort(gw.String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		peer := make(chan string, 1)
		go func() {
			if conn, err := ln.Accept(); err == nil {
				peer <- conn.RemoteAddr().(*net.TCPAddr).IP.String()
				conn.Close()
			}
		}()
		dial := "exec 3<>/dev/tcp/" + gw.String() + "/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + " && echo connected"
		if res, err := c.Run(ctx, "root", dial, time.Minute); err != nil || !strings.Contains(string(res.Stdout), "connected") {
			t.Fatalf("%s: %v %q %q", dial, err, res.Stdout, res.Stderr)
		}
		select {
		case p := <-peer:
			return p
		case <-time.After(10 * time.Second):
			t.Fatal("the host's end saw no connection")
			return ""
		}
	}
	if got := from(gw1); got != addr1.String() {
		t.Errorf("before the checkpoint, the guest's connection came from %s, want %s", got, addr1)
	}
	image := t.TempDir()
	if err := d.Checkpoint(ctx, id, image); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Restore(ctx, id, image, ns2); err != nil {
		t.Fatal(err)
	}
	if len(d.held) != 0 {
		t.Errorf("the first namespace is still held: %v", d.held)
	}
	if got := from(gw2); got != addr2.String() {
		t.Errorf("after the restore, the guest's connection came from %s, want %s", got, addr2)
	}
}

// TestClone copies a running guest whole into a new sandbox, as the node
// forks one (its files, then its machine): the copy's process goes on
// from the source's count, under the copy's host name, its files its own
// from then on; the source goes on unchanged.
func TestClone(t *testing.T) {
	cfg, _ := testDriver(t)
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	spec := isolation.Spec{
		RootFS: isolation.RootFS{Layers: []string{testutil.ProgramsRoot(t, "bash", "cat", "sleep", "sync")}},
		Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 128, DiskMB: 64, PIDs: 64},
	}
	src, dst := isolationtest.NewID(), isolationtest.NewID()
	cs, cd := createGuest(t, ctx, d, src, spec), guestAgent(t, d, dst)
	startLoop(t, ctx, cs, "echo from-source > /tmp/file")
	state := func(c *agentclient.Client) (string, int) { t.Helper(); return loopState(t, ctx, c) }
	x, before := state(cs)
	// The node pauses a sandbox around its copy, and copies its files
	// first: the machine is saved while the guest's init waits for the end
	// of that export, with the sandbox frozen.
	if err := d.Pause(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := d.SaveLayer(ctx, src, filepath.Join(t.TempDir(), "layer")); err != nil {
		t.Fatal(err)
	}
	image := t.TempDir()
	start := time.Now()
	if err := d.Image(ctx, src, image); err != nil {
		t.Fatal(err)
	}
	imaged := time.Since(start)
	if err := d.Resume(ctx, src); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := d.Clone(ctx, dst, spec, image); err != nil {
		t.Fatal(err)
	}
	t.Logf("image in %v, clone in %v", imaged.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	for _, c := range []struct {
		name  string
		agent *agentclient.Client
	}{{src, cs}, {dst, cd}} {
		if y, n := state(c.agent); y != x || n < before {
			t.Errorf("%s's loop: %s %d, the source's before the copy: %s %d", c.name, y, n, x, before)
		}
		res, err := c.agent.Run(ctx, "root", "echo $HOSTNAME; cat /tmp/file", time.Minute)
		if want := c.name + "\nfrom-source\n"; err != nil || string(res.Stdout) != want {
			t.Errorf("%s: %q %v, want %q", c.name, res.Stdout, err, want)
		}
	}
	if res, err := cd.Run(ctx, "root", "echo from-copy > /tmp/file", time.Minute); err != nil || res.ExitCode != 0 {
		t.Fatalf("a write in the copy: %v %+v", err, res)
	}
	if res, err := cs.Run(ctx, "root", "cat /tmp/file", time.Minute); err != nil || string(res.Stdout) != "from-source\n" {
		t.Errorf("the source's file after the copy wrote its own: %q %v", res.Stdout, err)
	}
	// Both write to their disks on: written back, read again.
	for _, c := range []*agentclient.Client{cs, cd} {
		res, err := c.Run(ctx, "root", "echo written > /tmp/later && sync && cat /tmp/later", time.Minute)
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "written\n" {
			t.Errorf("a write after the copy: %v %+v %q", err, res, res.Stderr)
		}
	}
	// Both loops go on (a loaded host gives emulated guests little time).
	for _, c := range []*agentclient.Client{cs, cd} {
		_, n := state(c)
		if !testkit.Wait(30*time.Second, func() bool { _, m := state(c); return m > n }) {
			t.Errorf("a loop stands still after the copy at %d", n)
		}
	}
	// A paused sandbox forked and then written to disk, as the node's
	// spill does after a fork: the checkpoint starts from what the copy
	// left QEMU in (migrated, its disks given up), and the guest comes
	// back with its loop.
	if err := d.Pause(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := d.Image(ctx, src, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	checkpoint := t.TempDir()
	if err := d.Checkpoint(ctx, src, checkpoint); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Restore(ctx, src, checkpoint, nil); err != nil {
		t.Fatal(err)
	}
	if y, n := state(cs); y != x || n < before {
		t.Errorf("the source's loop after a copy and a checkpoint while paused: %s %d", y, n)
	}
	if res, err := cs.Run(ctx, "root", "cat /tmp/later", time.Minute); err != nil || string(res.Stdout) != "written\n" {
		t.Errorf("the source's file after a copy and a checkpoint while paused: %q %v", res.Stdout, err)
	}
	for _, id := range []string{src, dst} {
		if con := d.get(id).vm.Console(); strings.Contains(con, "I/O error") || strings.Contains(con, "EXT4-fs error") {
			t.Errorf("%s's disk failed: %s", id, lastLines(con, 10))
		}
	}
}

// startLoop runs first, then a shell loop in the background that writes
// its mark (its pid and a random number, held in its memory) and its
// count to /tmp/state, ten times a second.
func startLoop(t *testing.T, ctx context.Context, c *agentclient.Client, first string) {
	t.Helper()
	loop := `x=$$-$RANDOM; i=0; while :; do i=$((i+1)); echo "$x $i" > /tmp/state; sleep 0.1; done`
	var started agentclient.Result
	if err := c.Exec(ctx, agentclient.Command{Cmd: "/bin/bash", Args: []string{"-c", first + "; " + loop}, User: "root", Background: true}, nil, &started); err != nil {
		t.Fatal(err)
	}
}

// loopState reads startLoop's mark and count (30 s at most: an emulated
// guest on a loaded host writes slowly).
func loopState(t *testing.T, ctx context.Context, c *agentclient.Client) (string, int) {
	t.Helper()
	var mark string
	var n int
	testkit.Eventually(t, 30*time.Second, func() error {
		res, err := c.Run(ctx, "root", "cat /tmp/state", time.Minute)
		if f := strings.Fields(string(res.Stdout)); err == nil && len(f) == 2 {
			mark = f[0]
			n, _ = strconv.Atoi(f[1])
			return nil
		}
		return fmt.Errorf("the loop's state: %v %q %q", err, res.Stdout, res.Stderr)
	})
	return mark, n
}
