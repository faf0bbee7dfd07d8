package namespaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/inside"
	"github.com/covesandbox/cove/internal/isolation/namespaces/nsinit"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/phase"
)

const cloneFlags = unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET

// Create implements isolation.Driver. It returns once the agent inside
// listens; on any failure or cancellation it removes all it made.
func (d *Driver) Create(ctx context.Context, id string, spec isolation.Spec) (h isolation.Handle, err error) {
	if err := validateSpec(id, spec); err != nil {
		return h, err
	}
	dir := d.dir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return h, errs.New(errs.AlreadyExists, "sandbox %s already exists", id)
		}
		return h, fmt.Errorf("create sandbox directory: %w", err)
	}
	var (
		proc  *initProc
		cg    *cgroups.Group
		ready *os.File
	)
	defer func() {
		if err == nil {
			return
		}
		cleanup, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if proc != nil {
			_ = proc.kill()
			proc.wait()
		}
		if cg != nil {
			if derr := cg.Destroy(cleanup); derr != nil {
				d.log.Error("clean up failed create", logx.SandboxID(id), logx.Err(derr))
			}
		}
		if rerr := fsutil.RemoveTree(dir); rerr != nil {
			d.log.Error("clean up failed create", logx.SandboxID(id), logx.Err(rerr))
		}
	}()
	spec.UserNamespace = spec.UserNamespace || (d.cfg.UserNamespaces && spec.RootFS.Upper == "")
	if spec.RootFS.Upper == "" { // not into a template's layer
		// The sandbox binary, read-only at inside.AgentPath, as gVisor has it: the
		// code interpreter a template starts runs from it.
		spec.RootFS.Binds = append(slices.Clip(spec.RootFS.Binds), isolation.Bind{Source: d.agent, Target: inside.AgentPath})
	}
	var idBase uint32
	if spec.UserNamespace {
		if idBase, err = d.ids.take(); err != nil {
			return h, err
		}
		defer func() {
			if err != nil {
				d.ids.free(idBase)
			}
		}()
	} else if err := os.Mkdir(filepath.Join(dir, "rw"), 0o700); err != nil {
		// The writable layer's mount point (a user-namespaced init makes
		// its own, in its mount namespace).
		return h, fmt.Errorf("create mount point: %w", err)
	}
	proc, cg, ready, err = d.start(ctx, id, dir, spec, idBase)
	if err != nil {
		return h, err
	}
	if err := waitReady(ctx, ready, dir); err != nil {
		return h, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	phase.Mark(ctx, "agent_ready")
	if err := d.startClocks(id, proc.pid); err != nil {
		return h, err
	}
	netns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", proc.pid))
	if err != nil {
		return h, fmt.Errorf("open sandbox network namespace: %w", err)
	}
	start, err := hostproc.StartTime(proc.pid)
	if err != nil {
		netns.Close()
		return h, fmt.Errorf("read sandbox init: %w", err)
	}
	h = isolation.Handle{ID: id, Driver: d.Name(), PID: proc.pid, StartTime: start, CreatedAt: time.Now().UTC()}
	if err := hostproc.WriteRecord(dir, hostproc.Record{Handle: h, Cgroup: cg.Name(), Limits: spec.Limits, UserNSBase: idBase}); err != nil {
		netns.Close()
		return h, fmt.Errorf("record sandbox state: %w", err)
	}
	sb := &sandbox{id: id, handle: h, cg: cg, netns: netns, limits: spec.Limits, idBase: idBase, end: hostproc.NewEnd()}
	d.mu.Lock()
	d.sandboxes[id] = sb
	d.mu.Unlock()
	go d.watchChild(sb, proc)
	phase.Mark(ctx, "driver_record")
	return h, nil
}

func validateSpec(id string, spec isolation.Spec) error {
	if err := isolation.ValidateSpec(id, spec); err != nil {
		return err
	}
	if spec.RootFS.Upper != "" && spec.UserNamespace {
		return errs.New(errs.InvalidArgument, "a host writable layer cannot be used with a user namespace")
	}
	return nil
}

// start launches the sandbox's init in its namespaces and, while the init
// starts up, creates its cgroup, moves it in and only then sends it its
// config. The returned file reads the agent's readiness. On error the
// returned init and group (if any) are the caller's to clean up.
func (d *Driver) start(ctx context.Context, id, dir string, spec isolation.Spec, idBase uint32) (*initProc, *cgroups.Group, *os.File, error) {
	// The config goes through a pipe, or a socket when it brings the
	// user namespace's id-mapped mounts along.
	cfgR, cfgW, err := configChannel(spec.UserNamespace)
	if err != nil {
		return nil, nil, nil, err
	}
	defer cfgW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		return nil, nil, nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		cfgR.Close()
		readyR.Close()
		readyW.Close()
		return nil, nil, nil, err
	}
	binary := d.cfg.Binary
	extra := []*os.File{cfgR, readyW} // nsinit.FDConfig, inside.FDReady
	if d.cfg.SandboxBinary != "" {
		binary = d.cfg.SandboxBinary
		if spec.UserNamespace {
			// Executed through a descriptor (inside.FDOOM's place until the init
			// puts the OOM counter there): the namespace's root may not
			// reach the binary's directory.
			exe, err := os.OpenFile(binary, os.O_RDONLY|unix.O_PATH, 0)
			if err != nil {
				cfgR.Close()
				readyR.Close()
				readyW.Close()
				logf.Close()
				return nil, nil, nil, fmt.Errorf("open the sandbox binary: %w", err)
			}
			defer exe.Close()
			extra = append(extra, exe)
			binary = fmt.Sprintf("/proc/self/fd/%d", inside.FDOOM)
		}
	}
	// Placeholders keep inside.FDOOM and inside.FDLayer free until the init puts the
	// OOM counter and its writable layer there (the mounts it receives
	// land above them).
	null, err := os.Open(os.DevNull)
	if err != nil {
		cfgR.Close()
		readyR.Close()
		readyW.Close()
		logf.Close()
		return nil, nil, nil, err
	}
	defer null.Close()
	for len(extra) <= inside.FDLayer-3 {
		extra = append(extra, null)
	}
	req := nsinit.SpawnRequest{Path: binary, Args: []string{nsinit.InitArg0}, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Cloneflags: cloneFlags}
	if spec.NetNS != nil {
		req.Cloneflags &^= unix.CLONE_NEWNET // born inside the pooled one: a user-namespaced child could not join it later
	}
	if spec.UserNamespace {
		req.Owner = idBase
	}
	proc, err := d.spawner.spawn(req, spec.NetNS, append([]*os.File{null, logf, logf}, extra...))
	cfgR.Close()
	readyW.Close()
	logf.Close()
	if err != nil {
		readyR.Close()
		return nil, nil, nil, fmt.Errorf("start sandbox init: %w", err)
	}
	phase.Mark(ctx, "spawn")
	if spec.Background { // before it does anything: it waits for its config
		if err := unix.Setpriority(unix.PRIO_PROCESS, proc.pid, backgroundNice); err != nil {
			readyR.Close()
			return proc, nil, nil, fmt.Errorf("lower the sandbox's priority: %w", err)
		}
	}
	cg, err := cgroups.New(d.cgroupName(id), cgroups.Limits{
		CPUMillis:   spec.Limits.CPUMillis,
		MemoryBytes: spec.Limits.MemoryMB << 20,
		PIDs:        spec.Limits.PIDs,
		IOWeight:    100,
	})
	if err != nil {
		readyR.Close()
		return proc, nil, nil, err
	}
	if err := cg.Add(proc.pid); err != nil {
		readyR.Close()
		return proc, cg, nil, err
	}
	phase.Mark(ctx, "cgroup")
	if spec.UserNamespace {
		if err := sendIDMappedMounts(cfgW, spec, proc.pid); err != nil {
			readyR.Close()
			return proc, cg, nil, err
		}
	}
	cfg := nsinit.Config{
		ID: id, Dir: dir, Layers: spec.RootFS.Layers, Binds: spec.RootFS.Binds, Upper: spec.RootFS.Upper,
		DiskBytes: spec.Limits.WritableBytes(), ShmBytes: spec.Limits.ShmBytes(),
		Env: spec.Env, UserNS: spec.UserNamespace, OOMFile: cg.OOMFile(),
		OwnNet: spec.NetNS == nil, DNS: spec.DNS, Agent: spec.Agent, LXCFS: d.cfg.LXCFS,
	}
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		readyR.Close()
		return proc, cg, nil, fmt.Errorf("send sandbox config: %w", err)
	}
	phase.Mark(ctx, "config")
	return proc, cg, readyR, nil
}

// waitReady waits for the agent's readiness byte. EOF means the init died:
// its log says why.
func waitReady(ctx context.Context, ready *os.File, dir string) error {
	result := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := ready.Read(b[:])
		result <- err
	}()
	select {
	case err := <-result:
		ready.Close()
		if err == nil {
			return nil
		}
		if errors.Is(err, io.EOF) {
			tail := agentLogTail(dir)
			if _, why, ok := strings.Cut(tail, nsinit.InitRefused); ok {
				return errs.New(errs.InvalidArgument, "%s", strings.TrimSpace(why))
			}
			return errs.New(errs.Internal, "sandbox init failed: %s", tail)
		}
		return err
	case <-ctx.Done():
		ready.Close() // unblocks the reader
		return errs.Mark(errs.Canceled, ctx.Err())
	}
}

// agentLogTail returns the end of a sandbox's agent log, for error messages.
func agentLogTail(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "agent.log"))
	if err != nil || len(b) == 0 {
		return "no output"
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}

// watchChild reaps the init this node started and records why it ended.
func (d *Driver) watchChild(sb *sandbox, proc *initProc) {
	d.ended(sb, proc.wait())
}

// ended records how a sandbox's init ended and wakes Wait.
func (d *Driver) ended(sb *sandbox, detail string) {
	var exit isolation.Exit
	switch {
	case sb.destroying.Load():
		exit = isolation.Exit{Reason: isolation.ExitDestroyed}
	case sb.oomKilled():
		exit = isolation.Exit{Reason: isolation.ExitOOM, Detail: "the sandbox's agent was killed for memory: " + detail}
	default:
		exit = isolation.Exit{Reason: isolation.ExitCrashed, Detail: detail}
	}
	sb.end.Set(exit)
	d.log.Info("sandbox ended", logx.SandboxID(sb.id), "reason", exit.Reason, "detail", exit.Detail, "pid", strconv.Itoa(sb.handle.PID))
}

func (sb *sandbox) oomKilled() bool {
	n, err := sb.cg.OOMKills()
	return err == nil && n > 0
}
