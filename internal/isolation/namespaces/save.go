package namespaces

import (
	"context"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/inside"
)

var _ isolation.LayerSaver = (*Driver)(nil)

// SaveLayer implements isolation.LayerSaver. The writable layer lives in
// the sandbox's mount namespace only; its init (the agent) keeps it open
// at inside.FDLayer, and the node reads it through /proc. Owners are shifted back
// from the sandbox's host id range to the ids it sees. The sandbox must be
// paused: the copy walks the tree by path, from the host's root, and a
// running sandbox could turn a directory into a link to a host path
// between the look and the step.
func (d *Driver) SaveLayer(_ context.Context, id, dst string) error {
	sb := d.get(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	rw := fmt.Sprintf("/proc/%d/fd/%d", sb.handle.PID, inside.FDLayer)
	var fs unix.Statfs_t
	if err := unix.Statfs(rw, &fs); err != nil {
		return fmt.Errorf("sandbox %s's writable layer: %w", id, err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("sandbox %s's writable layer is not its tmpfs", id)
	}
	err := fsutil.CopyTree(filepath.Join(rw, "upper"), dst, fsutil.CopyOptions{
		Overlay: true, UserXattrs: sb.idBase != 0, Shift: -sb.idBase,
	})
	if err != nil {
		return fmt.Errorf("copy sandbox %s's writable layer: %w", id, err)
	}
	return nil
}
