package microvm

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestDriver runs the base template (its layer and the host's /usr, both
// read-only) in a guest through the driver: commands as root and as the
// template's user, the sandbox's host name, the guest's own kernel; bad
// input is refused without a trace; a destroyed guest leaves nothing.
func TestDriver(t *testing.T) {
	cfg, rootFS := testDriver(t)
	dir := filepath.Dir(cfg.Dir)
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDriver(DriverConfig{Dir: filepath.Join(dir, "a,b"), SandboxBinary: d.cfg.SandboxBinary}); !errs.Is(err, errs.InvalidArgument) {
		t.Errorf("a directory with a comma: %v", err)
	}
	// 512 MiB, E2B's default: the guest kernel turns transparent huge
	// pages off by itself in a smaller machine.
	spec := isolation.Spec{
		RootFS: rootFS, Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 512, DiskMB: 64, PIDs: 256},
		Env: map[string]string{"E2B_SANDBOX": "true"}, Agent: isolation.AgentSettings{DefaultUser: "user", DefaultWorkdir: "/home/user"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Bad input: refused, nothing left.
	for _, tc := range []struct {
		name string
		edit func(*isolation.Spec)
		kind errs.Kind
	}{
		{"a build's writable layer", func(s *isolation.Spec) { s.RootFS.Upper = dir }, errs.Unimplemented},
		{"no layer", func(s *isolation.Spec) { s.RootFS.Layers = nil }, errs.InvalidArgument},
		{"a missing layer", func(s *isolation.Spec) { s.RootFS.Layers = []string{filepath.Join(dir, "nope")} }, errs.InvalidArgument},
		{"a relative bind", func(s *isolation.Spec) {
			s.RootFS.Binds = append(s.RootFS.Binds, isolation.Bind{Source: "usr", Target: "/x"})
		}, errs.InvalidArgument},
		{"more shares than a guest takes", func(s *isolation.Spec) {
			for len(s.RootFS.Binds) <= virtioTransports {
				s.RootFS.Binds = append(s.RootFS.Binds, isolation.Bind{Source: "/usr", Target: "/usr"})
			}
		}, errs.InvalidArgument},
		{"no memory", func(s *isolation.Spec) { s.Limits.MemoryMB = 0 }, errs.InvalidArgument},
		{"no CPU", func(s *isolation.Spec) { s.Limits.CPUMillis = 0 }, errs.InvalidArgument},
	} {
		bad := spec
		bad.RootFS.Binds = append([]isolation.Bind(nil), spec.RootFS.Binds...)
		tc.edit(&bad)
		id := isolationtest.NewID()
		if _, err := d.Create(ctx, id, bad); !errs.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.kind)
		}
		if left := leaks(d.cfg.Dir, id); len(left) > 0 {
			t.Errorf("%s: left %v", tc.name, left)
		}
	}
	if _, err := d.Create(ctx, "../escape", spec); err == nil {
		t.Error("an id with a path was accepted")
	}
	// A create cancelled before, or while the guest boots.
	for _, after := range []time.Duration{0, 50 * time.Millisecond, time.Second} {
		cctx, ccancel := context.WithCancel(ctx)
		if after == 0 {
			ccancel()
		} else {
			time.AfterFunc(after, ccancel)
		}
		id := isolationtest.NewID()
		_, err := d.Create(cctx, id, spec)
		ccancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a create cancelled after %v: %v", after, err)
		}
		if left := leaks(d.cfg.Dir, id); len(left) > 0 {
			t.Errorf("a create cancelled after %v left %v", after, left)
		}
	}

	id := isolationtest.NewID()
	start := time.Now()
	if _, err := d.Create(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	t.Logf("create → agent ready in %v (KVM: %v)", time.Since(start).Round(time.Millisecond), KVMAvailable())
	if _, err := d.Create(ctx, id, spec); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("a second create of %s: %v", id, err)
	}
	// The layers are erofs disks (one image per layer, kept for the next
	// guest); only the binds are shares, each served by a virtiofsd.
	images, _ := filepath.Glob(filepath.Join(d.cfg.Dir, imagesDir, "*.erofs"))
	if len(images) != len(spec.RootFS.Layers) {
		t.Errorf("layer images %v for layers %v", images, spec.RootFS.Layers)
	}
	if n := len(d.get(id).vm.fsds); n != len(spec.RootFS.Binds) {
		t.Errorf("%d virtiofsds for %d binds", n, len(spec.RootFS.Binds))
	}
	// A read-only share's virtiofsd serves with no capability (its
	// serving process: the one it forks).
	for _, fsd := range d.get(id).vm.fsds {
		pid := strconv.Itoa(fsd.h.PID)
		kids, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
		if err != nil || len(strings.Fields(string(kids))) != 1 {
			t.Fatalf("virtiofsd %d's children: %q %v", fsd.h.PID, kids, err)
		}
		if caps := statusField(t, strings.TrimSpace(string(kids)), "CapEff:")[0]; caps != "0000000000000000" {
			t.Errorf("a read-only share's virtiofsd serves with capabilities %s", caps)
		}
	}
	// QEMU runs as a uid of its own, without capabilities, chrooted into
	// an empty directory, and holds its uid's lock.
	qemuPID := d.get(id).vm.qemu.h.PID
	uids := statusField(t, strconv.Itoa(qemuPID), "Uid:")
	if len(uids) != 4 || uids[0] != uids[1] || uids[0] != uids[2] || uids[0] != uids[3] {
		t.Errorf("QEMU's uids: %v", uids)
	}
	n, _ := strconv.ParseUint(uids[0], 10, 32)
	uid := uint32(n)
	if caps := statusField(t, strconv.Itoa(qemuPID), "CapPrm:"); caps[0] != "0000000000000000" {
		t.Errorf("QEMU keeps capabilities: %v", caps)
	}
	if uid < vmmUserBase || uid >= vmmUserBase+vmmUsers {
		t.Errorf("QEMU runs as uid %d, want one of %d..", uid, vmmUserBase)
	}
	if root, err := os.Readlink("/proc/" + strconv.Itoa(qemuPID) + "/root"); err != nil || root != filepath.Join(d.dir(id), "jail") {
		t.Errorf("QEMU's root: %q %v", root, err)
	}
	if lock, err := os.Open(filepath.Join(VMMUserDir, strconv.FormatUint(uint64(uid), 10))); err != nil {
		t.Error(err)
	} else {
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
			t.Errorf("uid %d's lock while its QEMU runs: %v", uid, err)
		}
		lock.Close()
	}
	waited := make(chan isolation.Exit, 1)
	go func() {
		exit, _ := d.Wait(context.Background(), id)
		waited <- exit
	}()
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
	res, err := c.Run(ctx, "root", "hostname; uname -r; id -u; echo $E2B_SANDBOX; python3 -c 'print(6*7)'", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("a command as root: %v %+v %s", err, res, res.Stderr)
	}
	if want := id + "\n" + d.kernel.Release + "\n0\ntrue\n42\n"; string(res.Stdout) != want {
		t.Errorf("as root: %q, want %q", res.Stdout, want)
	}
	res, err = c.Run(ctx, "", "id -un; pwd; echo hi > note && cat note", time.Minute)
	if err != nil || string(res.Stdout) != "user\n/home/user\nhi\n" {
		t.Errorf("as the default user: %v %q %q", err, res.Stdout, res.Stderr)
	}
	// The guest's processes are not given huge pages they did not ask
	// for (an idle agent and init held 12 to 16 MiB of them): not even
	// one that touches every page of 64 MiB.
	res, err = c.Run(ctx, "", `python3 -c "
b = bytearray(64 << 20); b[::4096] = bytes(len(b) // 4096)
print([l.split()[1] for l in open('/proc/meminfo') if l.startswith('AnonHugePages:')][0])"`, time.Minute)
	if err != nil || string(res.Stdout) != "0\n" {
		t.Errorf("the guest's transparent huge pages (kB): %v %q %q", err, res.Stdout, res.Stderr)
	}
	// A guest that shares host directories (the base template's /usr)
	// cannot be saved whole, and goes on.
	if err := d.Checkpoint(ctx, id, filepath.Join(dir, "checkpoint")); !errs.Is(err, errs.Unimplemented) {
		t.Errorf("a checkpoint of a guest with shares: %v", err)
	}
	if err := d.Image(ctx, id, filepath.Join(dir, "image")); !errs.Is(err, errs.Unimplemented) {
		t.Errorf("a copy of a guest with shares: %v", err)
	}
	// The guest's clock is the host's, also after the machine stood still
	// for a while (its clock with it).
	if err := d.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := d.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	res, err = c.Run(ctx, "root", "date +%s.%N", time.Minute)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if secs, err := strconv.ParseFloat(strings.TrimSpace(string(res.Stdout)), 64); err != nil {
		t.Errorf("the guest's date: %q", res.Stdout)
	} else if clock := time.Unix(0, int64(secs*1e9)); clock.Before(before.Add(-time.Second)) || clock.After(after.Add(time.Second)) {
		t.Errorf("the guest's clock after a pause of 3 s: %v, the host's %v…%v", clock, before, after)
	}
	// Memory the guest frees goes back to the host (free page reporting):
	// after a burst of 160 MiB, the guest's host memory falls again.
	usage := func() int64 {
		st, err := d.get(id).cg.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return int64(st.MemoryUsage)
	}
	res, err = c.Run(ctx, "root", "python3 -c 'x = bytearray(160 << 20); x[::4096] = b\"1\" * len(x[::4096])'", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the burst: %v %+v %s", err, res, res.Stderr)
	}
	peak := usage()
	if !testkit.Wait(time.Minute, func() bool { return usage() <= peak-100<<20 }) {
		t.Errorf("the guest's host memory stays at %d MiB a minute after a 160 MiB burst ended (%d MiB then)", usage()>>20, peak>>20)
	}
	t.Logf("host memory after a 160 MiB burst: %d MiB, then %d MiB", peak>>20, usage()>>20)
	// The init's export of the writable layer is the node's alone: a
	// sandbox that dials it, as root, gets nothing and is not frozen; the
	// node's dials to the sandbox's loopback do not reach it.
	res, err = c.Run(ctx, "root", "timeout 10 cat < /dev/tcp/"+guestAddr+"/"+strconv.Itoa(guest.ControlPort)+" | wc -c; echo alive", time.Minute)
	if err != nil || string(res.Stdout) != "0\nalive\n" {
		t.Errorf("the sandbox dialled the export: %v %q %q", err, res.Stdout, res.Stderr)
	}
	if _, err := d.Dial(ctx, id, guest.ControlPort); !errs.Is(err, errs.Unavailable) {
		t.Errorf("the export through the loopback forwarder: %v", err)
	}
	c.Close()
	// A connection open into the guest ends with it (a gone guest sends
	// no FIN): the stream of a command in a killed sandbox ends.
	held, err := d.Dial(ctx, id, 49983)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	held.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := held.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a connection into the destroyed guest: %v, want it closed", err)
	}
	held.Close()
	select {
	case exit := <-waited:
		if exit.Reason != isolation.ExitDestroyed {
			t.Errorf("Wait after Destroy: %+v", exit)
		}
	case <-time.After(30 * time.Second):
		t.Error("Wait did not return after Destroy")
	}
	if err := d.Destroy(ctx, id); err != nil {
		t.Errorf("a second destroy: %v", err)
	}
	if _, err := d.Dial(ctx, id, 49983); !errs.Is(err, errs.NotFound) {
		t.Errorf("dial of a destroyed guest: %v", err)
	}
	if left := leaks(d.cfg.Dir, id); len(left) > 0 {
		t.Errorf("left after destroy: %v", left)
	}
	if ids, err := d.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("list after destroy: %v %v", ids, err)
	}

	// A node restarted: its new driver lists what the old one left, does
	// not adopt it for a handle that names another process, and a destroy
	// ends the guest's processes, mounts and cgroup.
	lost := isolationtest.NewID()
	if _, err := d.Create(ctx, lost, spec); err != nil {
		t.Fatal(err)
	}
	restarted, err := NewDriver(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := restarted.List(ctx); err != nil || len(ids) != 1 || ids[0] != lost {
		t.Errorf("the restarted driver lists %v %v", ids, err)
	}
	if err := restarted.Recover(ctx, isolation.Handle{ID: lost, PID: 1}); !errs.Is(err, errs.NotFound) {
		t.Errorf("recover with a handle naming another process: %v", err)
	}
	if err := restarted.Destroy(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if left := leaks(d.cfg.Dir, lost); len(left) > 0 {
		t.Errorf("left after the restarted driver's destroy: %v", left)
	}
}

// TestConformance runs the drivers' conformance suite on guests.
func TestConformance(t *testing.T) {
	cfg, rootFS := testDriver(t)
	conformance(t, cfg, rootFS, nil)
}

// TestConformanceFromSnapshots runs the conformance suite on guests
// started from boot snapshots (BootSnapshots), the base template's /usr
// on its image (BindImages), which each driver waits for: in make
// test-long, as the image of the host's /usr takes a minute or more.
func TestConformanceFromSnapshots(t *testing.T) {
	if os.Getenv("COVE_LONG") == "" {
		t.Skip("an image of the host's /usr: make test-long (COVE_LONG)")
	}
	cfg, rootFS := testDriver(t)
	cfg.BindImages, cfg.BootSnapshots = true, true
	conformance(t, cfg, rootFS, func(t *testing.T, d *Driver) {
		for _, b := range rootFS.Binds {
			waitBindImage(t, d, b.Source, "")
		}
	})
}

// conformance runs the suite on drivers of cfg, each made ready by ready
// (nil: none).
func conformance(t *testing.T, cfg DriverConfig, rootFS isolation.RootFS, ready func(*testing.T, *Driver)) {
	isolationtest.Run(t, isolationtest.Config{
		New: func(t *testing.T) isolation.Driver {
			d, err := NewDriver(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			if ready != nil {
				ready(t, d)
			}
			return d
		},
		Spec: func(*testing.T) isolation.Spec {
			return isolation.Spec{RootFS: rootFS, Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 64, PIDs: 256},
				Agent: isolation.AgentSettings{DefaultUser: "user", DefaultWorkdir: "/home/user"}}
		},
		Leaks: func(t *testing.T, id string) []string { return leaks(cfg.Dir, id) },
	})
}
