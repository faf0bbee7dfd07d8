package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/inside"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/phase"
)

// Create implements isolation.Driver. It returns once the agent inside
// answers; on any failure or cancellation it removes all it made.
func (d *Driver) Create(ctx context.Context, id string, spec isolation.Spec) (isolation.Handle, error) {
	return d.create(ctx, id, spec, "")
}

// create makes sandbox id from spec; with image, its kernel is not booted
// but restored from that checkpoint (Clone).
func (d *Driver) create(ctx context.Context, id string, spec isolation.Spec, image string) (h isolation.Handle, err error) {
	if err := isolation.ValidateSpec(id, spec); err != nil {
		return h, err
	}
	if spec.UserNamespace {
		return h, errs.New(errs.InvalidArgument, "the gvisor driver has no user namespaces (gVisor's own kernel stands between the sandbox and the host's)")
	}
	dir := d.dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return h, errs.New(errs.AlreadyExists, "sandbox %s already exists", id)
		}
		return h, fmt.Errorf("create sandbox directory: %w", err)
	}
	defer func() {
		if err == nil {
			return
		}
		cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var derr error
		if d.get(id) != nil { // it started: Destroy also waits for its end
			derr = d.Destroy(cleanup, id)
		} else {
			derr = d.remove(cleanup, id, d.cgroupName(id), isolation.Handle{})
		}
		if derr != nil {
			d.log.Error("clean up failed create", logx.SandboxID(id), logx.Err(derr))
		}
	}()
	// The driver makes the sandbox's group (runsc uses one that exists,
	// and sizes its kernel by it): the bundle binds its OOM counter.
	cg, err := cgroups.New(d.cgroupName(id), cgroups.Limits{
		CPUMillis:   spec.Limits.CPUMillis,
		MemoryBytes: spec.Limits.MemoryMB << 20,
		// The host sees the sandbox's kernel, gofer and stubs, not its
		// processes: room for their threads on top of the sandbox's own.
		PIDs:     spec.Limits.PIDs + 512,
		IOWeight: 100,
	})
	if err != nil {
		return h, err
	}
	phase.Mark(ctx, "cgroup")
	rootfs, err := mountRoot(dir, spec)
	if err != nil {
		return h, err
	}
	if err := isolation.WriteIdentity(rootfs, id, spec.DNS); err != nil {
		return h, err
	}
	netns := spec.NetNS
	if netns == nil {
		if netns, err = loopbackOnly(); err != nil {
			return h, err
		}
		defer netns.Close() // runsc's sandbox holds it from now on
	}
	bundle, err := d.bundleSpec(id, rootfs, fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), netns.Fd()), cg.OOMFile(), spec)
	if err != nil {
		return h, err
	}
	if err := writeBundle(dir, bundle); err != nil {
		return h, err
	}
	phase.Mark(ctx, "bundle")
	if err := ctx.Err(); err != nil {
		return h, err
	}
	pidFile := filepath.Join(dir, "pid")
	agentLog := filepath.Join(dir, "agent.log")
	if image != "" {
		if _, err := d.runscLogged(ctx, agentLog, "restore", "--image-path", image, "--bundle", dir, "--pid-file", pidFile, "--detach", id); err != nil {
			return h, fmt.Errorf("restore sandbox %s: %w", id, err)
		}
	} else {
		// create and start in one runsc: a runsc start is one more Go
		// program's start and a round trip to the sandbox.
		if _, err := d.runscLogged(ctx, agentLog, "run", "--detach", "--bundle", dir, "--pid-file", pidFile, id); err != nil {
			return h, fmt.Errorf("create sandbox %s: %w", id, err)
		}
	}
	phase.Mark(ctx, "runsc")
	if h, err = d.track(id, pidFile, cg, spec.Limits); err != nil {
		return h, err
	}
	if err := d.waitReady(ctx, id); err != nil {
		return h, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	phase.Mark(ctx, "agent_ready")
	return h, nil
}

// track makes a started runsc container a sandbox of the driver: its host
// process (the pid file names runsc's sandbox process, whose end is the
// sandbox's), its record on disk, a watch on its end.
func (d *Driver) track(id, pidFile string, cg *cgroups.Group, limits isolation.Limits) (isolation.Handle, error) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return isolation.Handle{}, fmt.Errorf("read the sandbox's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return isolation.Handle{}, fmt.Errorf("runsc reported pid %q for sandbox %s", b, id)
	}
	start, err := hostproc.StartTime(pid)
	if err != nil {
		return isolation.Handle{}, fmt.Errorf("sandbox %s ended as it started: %w", id, err)
	}
	if err := exposeStubs(cg); err != nil {
		return isolation.Handle{}, err
	}
	h := isolation.Handle{ID: id, Driver: d.Name(), PID: pid, StartTime: start, CreatedAt: time.Now().UTC()}
	if err := hostproc.WriteRecord(d.dir(id), hostproc.Record{Handle: h, Cgroup: cg.Name(), Limits: limits}); err != nil {
		return h, err
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return h, fmt.Errorf("watch sandbox %s: %w", id, err)
	}
	sb := &sandbox{id: id, handle: h, cg: cg, limits: limits, end: hostproc.NewEnd()}
	d.mu.Lock()
	d.sandboxes[id] = sb
	d.mu.Unlock()
	go d.watch(sb, pidfd)
	return h, nil
}

// stubOOMScoreAdj is the host OOM score adjustment of the processes that
// hold a sandbox's processes' address spaces (systrap's stubs).
const stubOOMScoreAdj = "1000"

// exposeStubs makes a process that exhausts the sandbox's memory the host
// OOM killer's victim rather than the gVisor kernel that runs them all
// (whose end is the sandbox's; its RSS, not the process's, is often the
// group's largest): every process in cg but runsc's sandbox (the kernel)
// and gofer is a stub, and gets stubOOMScoreAdj (raising needs no
// privilege; lowering the kernel's would need CAP_SYS_RESOURCE). Stubs made
// later are forked from one of these, and inherit it. The kernel ends the
// task whose stub was killed, and the sandbox goes on.
func exposeStubs(cg *cgroups.Group) error {
	pids, err := cg.Procs()
	if err != nil {
		return fmt.Errorf("the sandbox's processes: %w", err)
	}
	for _, pid := range pids {
		proc := "/proc/" + strconv.Itoa(pid)
		cmdline, _ := os.ReadFile(proc + "/cmdline")
		if bytes.HasPrefix(cmdline, []byte("runsc-")) {
			continue
		}
		if err := os.WriteFile(proc+"/oom_score_adj", []byte(stubOOMScoreAdj), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("expose the sandbox's processes to the OOM killer: %w", err)
		}
	}
	return nil
}

// mountRoot mounts the sandbox's root under dir: a size-capped tmpfs for
// the writable layer (or the spec's host directory), an overlay of the
// template's layers under it at dir/rootfs, with the mount points the
// bundle needs. Both are host mounts the driver removes in remove.
func mountRoot(dir string, spec isolation.Spec) (string, error) {
	rw := filepath.Join(dir, "rw")
	if spec.RootFS.Upper != "" {
		rw = spec.RootFS.Upper
	} else {
		if err := os.Mkdir(rw, 0o700); err != nil {
			return "", err
		}
		if err := unix.Mount("tmpfs", rw, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,"+isolation.TmpfsLimits(spec.Limits.WritableBytes())); err != nil {
			return "", fmt.Errorf("mount the writable layer: %w", err)
		}
	}
	upper, work := filepath.Join(rw, "upper"), filepath.Join(rw, "work")
	for _, p := range []string{upper, work} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
	}
	lower := make([]string, len(spec.RootFS.Layers))
	for i, l := range spec.RootFS.Layers { // overlayfs lists the topmost lower first
		lower[len(spec.RootFS.Layers)-1-i] = l
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,%s", strings.Join(lower, ":"), upper, work, isolation.SelfContainedUpper)
	root := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts); err != nil {
		return "", fmt.Errorf("mount the root overlay: %w", err)
	}
	// Mount points the bundle names, made inside the root only (a
	// template's links never lead the driver out of it).
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	points := []string{"proc", "dev", "sys", ".cove"}
	for _, b := range spec.RootFS.Binds {
		points = append(points, strings.TrimPrefix(b.Target, "/"))
	}
	for _, p := range points {
		if err := r.MkdirAll(p, 0o755); err != nil {
			return "", fmt.Errorf("mount point /%s: %w", p, err)
		}
	}
	for _, file := range []string{inside.AgentPath, inside.OOMPath} {
		f, err := r.OpenFile(strings.TrimPrefix(file, "/"), os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			return "", fmt.Errorf("mount point %s: %w", file, err)
		}
		f.Close()
	}
	if err := bindTmp(r, filepath.Join(dir, "tmp")); err != nil {
		return "", err
	}
	return root, nil
}

// bindTmp binds the root's /tmp at at. runsc mounts a tmpfs of its own,
// of no size, over an empty /tmp the bundle does not name — memory a
// sandbox could fill until the host ends it whole — so the bundle names
// this: the writable layer's /tmp, as on the namespaces driver, under the
// layer's size and inode caps. It is bound by what /tmp is now, resolved
// inside the root: the path runsc opens is the driver's own, which no
// link the sandbox makes later can redirect.
func bindTmp(r *os.Root, at string) error {
	switch err := r.Mkdir("tmp", 0o777); {
	case err == nil:
		if err := r.Chmod("tmp", 0o777|os.ModeSticky); err != nil {
			return fmt.Errorf("the sandbox's /tmp: %w", err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("the sandbox's /tmp: %w", err)
	}
	if err := isolation.LinkLeadsOut(r, "tmp"); err != nil {
		return err
	}
	tmp, err := r.Open("tmp")
	if err != nil {
		return fmt.Errorf("the sandbox's /tmp: %w", err)
	}
	defer tmp.Close()
	if st, err := tmp.Stat(); err != nil || !st.IsDir() {
		return errs.New(errs.InvalidArgument, "the template's /tmp is not a directory")
	}
	if err := os.Mkdir(at, 0o700); err != nil {
		return err
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", tmp.Fd()), at, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the sandbox's /tmp: %w", err)
	}
	return nil
}

// loopbackOnly makes a network namespace with only loopback, up.
func loopbackOnly() (*os.File, error) {
	ns, err := hostproc.NewNetNS()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(ns), "netns")
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		f.Close()
		return nil, err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("loopback of a new network namespace: %w", err)
	}
	return f, nil
}

// waitReady waits until the agent answers /health.
func (d *Driver) waitReady(ctx context.Context, id string) error {
	var last error
	for {
		if err := d.health(ctx, id); err == nil {
			return nil
		} else {
			last = err
		}
		if sb := d.get(id); sb != nil {
			if sb.end.Ended() {
				return fmt.Errorf("the sandbox ended before its agent answered: %s", sb.end.Exit().Detail)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (the agent: %v)", ctx.Err(), last)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// health asks the agent for /health once.
func (d *Driver) health(ctx context.Context, id string) error {
	c, err := d.Dial(ctx, id, 49983)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("GET /health HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if f := strings.Fields(line); len(f) < 2 || (f[1] != "200" && f[1] != "204") {
		return fmt.Errorf("agent health: %q", strings.TrimSpace(line))
	}
	return nil
}

// Dial implements isolation.Driver: 127.0.0.1:port inside the sandbox's
// network namespace, entered through its runsc process.
func (d *Driver) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	sb := d.get(id)
	if sb == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if sb.end.Ended() {
		return nil, errs.New(errs.Unavailable, "sandbox %s has ended", id)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", sb.handle.PID))
	if err != nil {
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("sandbox %s: %w", id, err))
	}
	defer ns.Close()
	c, err := hostproc.Dial(ctx, ns, d.host, port)
	if err != nil {
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("dial sandbox %s port %d: %w", id, port, err))
	}
	return c, nil
}

// watch waits for the sandbox's runsc process to end and records why.
func (d *Driver) watch(sb *sandbox, pidfd int) {
	defer unix.Close(pidfd)
	hostproc.WaitPidfd(pidfd)
	var exit isolation.Exit
	switch {
	case sb.destroying.Load():
		exit = isolation.Exit{Reason: isolation.ExitDestroyed}
	case sb.checkpointed.Load():
		exit = isolation.Exit{Reason: isolation.ExitCheckpointed}
	case oomKilled(sb.cg):
		exit = isolation.Exit{Reason: isolation.ExitOOM, Detail: "the sandbox was killed for memory"}
	default:
		exit = isolation.Exit{Reason: isolation.ExitCrashed, Detail: "the sandbox's gVisor kernel exited"}
	}
	sb.end.Set(exit)
	d.log.Info("sandbox ended", logx.SandboxID(sb.id), "reason", exit.Reason, "pid", strconv.Itoa(sb.handle.PID))
}

func oomKilled(cg *cgroups.Group) bool {
	n, err := cg.OOMKills()
	return err == nil && n > 0
}
