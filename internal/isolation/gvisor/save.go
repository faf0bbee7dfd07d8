package gvisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
)

var _ isolation.LayerSaver = (*Driver)(nil)

// SaveLayer implements isolation.LayerSaver: the writable layer is the
// host overlay's upper under the sandbox's directory, which runsc's gofer
// writes through. The sandbox must be paused (see the namespaces driver's).
func (d *Driver) SaveLayer(_ context.Context, id, dst string) error {
	// Known to the driver, or checkpointed before it restarted.
	if _, err := os.Stat(d.dir(id)); err != nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if err := fsutil.CopyTree(filepath.Join(d.dir(id), "rw", "upper"), dst, fsutil.CopyOptions{Overlay: true}); err != nil {
		return fmt.Errorf("copy sandbox %s's writable layer: %w", id, err)
	}
	return nil
}
