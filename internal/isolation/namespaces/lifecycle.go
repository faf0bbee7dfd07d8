package namespaces

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/phase"
)

// Wait implements isolation.Driver.
func (d *Driver) Wait(ctx context.Context, id string) (isolation.Exit, error) {
	sb := d.get(id)
	if sb == nil {
		return isolation.Exit{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return sb.end.Wait(ctx)
}

// Destroy implements isolation.Driver: kill the init (which takes its whole
// pid namespace with it), empty and remove the cgroup, drop the network
// namespace and delete the directory. Safe to call on leftovers of a
// sandbox the node no longer knows, and to call twice.
func (d *Driver) Destroy(ctx context.Context, id string) error {
	if err := isolation.ValidateID(id); err != nil {
		return err
	}
	// The sandbox's group is where it was made, even if the node's cgroup
	// parent changed since (it is in the state file).
	group := d.cgroupName(id)
	var idBase uint32
	if sb := d.get(id); sb != nil {
		idBase = sb.idBase
		sb.destroying.Store(true)
		_ = sb.cg.Thaw() // a frozen (paused) init cannot die
		_ = hostproc.Kill(sb.handle)
		if _, err := sb.end.Wait(ctx); err != nil {
			return fmt.Errorf("destroy %s: %w", id, err)
		}
		phase.Mark(ctx, "kill_init")
		sb.nsMu.Lock()
		sb.netns.Close()
		sb.netns = nil
		sb.nsMu.Unlock()
		group = sb.cg.Name()
	} else if st, err := hostproc.ReadRecord(d.dir(id)); err == nil {
		idBase = st.UserNSBase
		if cg, err := cgroups.Load(st.Cgroup); err == nil {
			_ = cg.Thaw() // a frozen (paused) init cannot die
		}
		_ = hostproc.Kill(st.Handle)
		if err := hostproc.WaitGone(ctx, st.Handle); err != nil {
			return fmt.Errorf("destroy %s: %w", id, err)
		}
		group = st.Cgroup
	}
	if cg, err := cgroups.Load(group); err == nil {
		if err := cg.Destroy(ctx); err != nil {
			return fmt.Errorf("destroy %s: %w", id, err)
		}
		phase.Mark(ctx, "cgroup")
	}
	if err := fsutil.RemoveTree(d.dir(id)); err != nil {
		return fmt.Errorf("destroy %s: %w", id, err)
	}
	phase.Mark(ctx, "files")
	d.mu.Lock()
	delete(d.sandboxes, id)
	d.mu.Unlock()
	if idBase != 0 { // nothing of the sandbox's is left to hold its ids
		d.ids.free(idBase)
	}
	return nil
}

// Recover implements isolation.Driver: re-adopt a sandbox whose init is
// still the process the handle names.
func (d *Driver) Recover(ctx context.Context, h isolation.Handle) error {
	if err := isolation.ValidateID(h.ID); err != nil {
		return err
	}
	if d.get(h.ID) != nil {
		return nil
	}
	st, err := hostproc.ReadRecord(d.dir(h.ID))
	if err != nil {
		return errs.New(errs.NotFound, "sandbox %s has no state: %v", h.ID, err)
	}
	if st.Handle.PID != h.PID || st.Handle.StartTime != h.StartTime {
		return errs.New(errs.NotFound, "sandbox %s: handle does not match its state", h.ID)
	}
	pidfd, err := unix.PidfdOpen(h.PID, 0)
	if err != nil || !hostproc.Alive(h) {
		if err == nil {
			unix.Close(pidfd)
		}
		return errs.New(errs.NotFound, "sandbox %s: its init is gone", h.ID)
	}
	cg, err := cgroups.Load(st.Cgroup)
	if err != nil {
		unix.Close(pidfd)
		return errs.New(errs.NotFound, "sandbox %s: %v", h.ID, err)
	}
	netns, err := os.Open("/proc/" + strconv.Itoa(h.PID) + "/ns/net")
	if err != nil {
		unix.Close(pidfd)
		return errs.New(errs.NotFound, "sandbox %s: %v", h.ID, err)
	}
	d.ids.mark(st.UserNSBase)
	sb := &sandbox{id: h.ID, handle: h, cg: cg, netns: netns, limits: st.Limits, idBase: st.UserNSBase, end: hostproc.NewEnd()}
	d.mu.Lock()
	d.sandboxes[h.ID] = sb
	d.mu.Unlock()
	go d.watchAdopted(sb, pidfd)
	d.log.Info("sandbox recovered", logx.SandboxID(h.ID), logx.PID(h.PID))
	return nil
}

// watchAdopted waits, through a pidfd, for an init this node did not start.
func (d *Driver) watchAdopted(sb *sandbox, pidfd int) {
	defer unix.Close(pidfd)
	hostproc.WaitPidfd(pidfd)
	d.ended(sb, "agent exited")
}

// List implements isolation.Lister: every sandbox with a directory here.
func (d *Driver) List(ctx context.Context) ([]string, error) {
	return hostproc.SandboxIDs(d.cfg.Dir)
}

// Stats implements isolation.Stater from the sandbox's cgroup.
func (d *Driver) Stats(ctx context.Context, id string) (isolation.Stats, error) {
	sb := d.get(id)
	if sb == nil {
		return isolation.Stats{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.limMu.Lock()
	limits := sb.limits
	sb.limMu.Unlock()
	s, err := hostproc.Stats(sb.cg, limits, fmt.Sprintf("/proc/%d/root/", sb.handle.PID))
	if err != nil {
		return isolation.Stats{}, fmt.Errorf("stats of %s: %w", id, err)
	}
	return s, nil
}

// backgroundNice is the niceness of a sandbox made ahead of time.
const backgroundNice = 10

// HandOver (isolation.HandOverer) starts the sandbox's clocks again, so
// that its uptime counts from the hand-over (startClocks), and gives every
// process the normal CPU priority: the processes a warm sandbox started
// while it waited (its agent, a template's start command) inherited nice
// 10.
func (d *Driver) HandOver(ctx context.Context, id string) error {
	sb := d.get(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if err := d.startClocks(id, sb.handle.PID); err != nil {
		return err
	}
	pids, err := sb.cg.Procs()
	if err != nil {
		return fmt.Errorf("processes of sandbox %s: %w", id, err)
	}
	for _, pid := range pids {
		// Niceness is per thread: every thread of every process (the agent
		// forks from one of its threads). A process or thread may have
		// exited since the listing: that is no error.
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			continue
		}
		for _, task := range tasks {
			tid, err := strconv.Atoi(task.Name())
			if err != nil {
				continue
			}
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 0); err != nil && err != unix.ESRCH {
				return fmt.Errorf("priority of thread %d of sandbox %s: %w", tid, id, err)
			}
		}
	}
	return nil
}

// AgentLog implements isolation.AgentLogger.
func (d *Driver) AgentLog(_ context.Context, id string, max int64) ([]byte, error) {
	if err := isolation.ValidateID(id); err != nil {
		return nil, err
	}
	return hostproc.LogTail(filepath.Join(d.dir(id), "agent.log"), max)
}
