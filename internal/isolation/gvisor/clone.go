package gvisor

import (
	"context"
	"fmt"
	"os"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
)

var _ isolation.Cloner = (*Driver)(nil)

// Image implements isolation.Cloner: runsc checkpoints the sandbox's
// kernel under dir and lets it go on (paused stays paused).
func (d *Driver) Image(ctx context.Context, id, dir string) error {
	if d.get(id) == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := d.runsc(ctx, "checkpoint", "--leave-running", "--image-path", dir, id); err != nil {
		return fmt.Errorf("copy sandbox %s's processes: %w", id, err)
	}
	return nil
}

// Clone implements isolation.Cloner: a create whose kernel is restored
// from image instead of booted. The restored kernel takes the new
// bundle's hostname, mounts and network namespace.
func (d *Driver) Clone(ctx context.Context, id string, spec isolation.Spec, image string) (isolation.Handle, error) {
	return d.create(ctx, id, spec, image)
}
