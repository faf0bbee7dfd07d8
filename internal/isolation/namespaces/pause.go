package namespaces

import (
	"context"

	"github.com/covesandbox/cove/internal/errs"
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
