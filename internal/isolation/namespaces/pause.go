package namespaces

import (
	"context"
	"fmt"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
)

// Pause freezes every process of the sandbox, its agent included, where it
// is (the cgroup freezer): its memory stays in RAM, it takes no CPU, and
// Resume lets it go on as if no time had passed for it.
func (d *Driver) Pause(_ context.Context, id string) error {
	sb := d.get(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return sb.cg.Freeze()
}

// Resume thaws a paused sandbox.
func (d *Driver) Resume(_ context.Context, id string) error {
	sb := d.get(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return sb.cg.Thaw()
}

// Resize implements isolation.Resizer: the sandbox's cgroup takes l's CPU
// quota and memory limit (what its /proc, through lxcfs, and its
// /sys/fs/cgroup show), and its record keeps them for a node that
// restarts. Memory the kernel cannot reclaim down to (EBUSY) is refused,
// the old limits put back.
func (d *Driver) Resize(_ context.Context, id string, l isolation.Limits) error {
	sb := d.get(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.limMu.Lock()
	defer sb.limMu.Unlock()
	next := sb.limits
	next.CPUMillis, next.MemoryMB = l.CPUMillis, l.MemoryMB
	if err := hostproc.SetLimits(d.log, sb.cg, id, sb.limits, next); err != nil {
		return err
	}
	if err := hostproc.WriteRecord(d.dir(id), hostproc.Record{Handle: sb.handle, Cgroup: sb.cg.Name(), Limits: next, UserNSBase: sb.idBase}); err != nil {
		return fmt.Errorf("record sandbox state: %w", err)
	}
	sb.limits = next
	return nil
}
