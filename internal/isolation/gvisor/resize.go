package gvisor

import (
	"context"
	"fmt"

	"github.com/covesandbox/cove/internal/cgroups"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
)

// Resize implements isolation.Resizer for a paused sandbox, frozen in
// place or checkpointed to disk: its group takes l's CPU quota and memory
// limit, which bound its kernel, gofer and processes from its resume, and
// its record keeps them (a restore tracks the sandbox with them). Memory
// the kernel cannot reclaim down to (EBUSY) is refused, the old limits
// put back. The sentry sized its own view (the CPUs and memory its
// /proc shows) at its boot: that view stays until it boots again.
func (d *Driver) Resize(_ context.Context, id string, l isolation.Limits) error {
	if err := isolation.ValidateID(id); err != nil {
		return err
	}
	rec, err := hostproc.ReadRecord(d.dir(id))
	if err != nil {
		return errs.New(errs.NotFound, "sandbox %s: %v", id, err)
	}
	sb := d.get(id)
	cg, cur := (*cgroups.Group)(nil), rec.Limits
	if sb != nil {
		sb.limMu.Lock()
		defer sb.limMu.Unlock()
		cg, cur = sb.cg, sb.limits
	} else if cg, err = cgroups.Load(rec.Cgroup); err != nil {
		return err
	}
	next := cur
	next.CPUMillis, next.MemoryMB = l.CPUMillis, l.MemoryMB
	if err := hostproc.SetLimits(d.log, cg, id, cur, next); err != nil {
		return err
	}
	rec.Limits = next
	if err := hostproc.WriteRecord(d.dir(id), rec); err != nil {
		return fmt.Errorf("record sandbox state: %w", err)
	}
	if sb != nil {
		sb.limits = next
	}
	return nil
}
