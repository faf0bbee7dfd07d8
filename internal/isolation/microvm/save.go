package microvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
	"github.com/covesandbox/cove/internal/layertar"
)

var _ isolation.LayerSaver = (*Driver)(nil)

// SaveLayer implements isolation.LayerSaver. The writable layer is the
// guest's disk, which the host never mounts (its file system is the
// guest's to shape): the guest's init packs the overlay's upper directory
// while the sandbox's processes are frozen in the guest
// (guest.ControlPort), and the node unpacks the archive as it does an
// image's layer, every path resolved inside dst. A paused guest runs for
// the copy, its sandbox frozen, and is stopped again before the init
// thaws the sandbox.
func (d *Driver) SaveLayer(ctx context.Context, id, dst string) error {
	s := d.get(id)
	if s == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	running, err := d.running(ctx, id)
	if err != nil {
		return err
	}
	if !running {
		if _, err := d.monitor(ctx, id, "cont"); err != nil {
			return err
		}
	}
	c, err := s.vm.dial(ctx, guest.ControlPort)
	if err == nil {
		defer c.Close() // after the stop below: the init thaws the sandbox then
		_, err = c.Write([]byte{guest.RequestExport})
	}
	if err == nil {
		// A guest that stalls holds up only its own copy (and the node's
		// lock on its sandbox) for so long.
		c.SetReadDeadline(time.Now().Add(exportTimeout))
		stop := context.AfterFunc(ctx, func() { c.Close() })
		err = receiveLayer(c, dst, 2*(s.limits.DiskMB<<20)+64<<20)
		stop()
		if err != nil && ctx.Err() != nil {
			err = errs.Mark(errs.Canceled, ctx.Err())
		}
	}
	if !running {
		if _, serr := d.monitor(context.WithoutCancel(ctx), id, "stop"); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		return fmt.Errorf("copy sandbox %s's writable layer: %w", id, err)
	}
	return nil
}

// exportTimeout bounds a guest's export of its writable layer.
const exportTimeout = 10 * time.Minute

// receiveLayer unpacks a guest's export from r into dst (created here),
// taking at most max bytes of archive.
func receiveLayer(r io.Reader, dst string, max int64) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	er := guest.NewExportReader(r, max)
	// What it writes is bounded as what it reads (a sparse entry expands),
	// and keeps the node's floor of free disk.
	budget := &fsutil.Budget{Max: max, Dir: dst, What: "a guest's writable layer"}
	if err := layertar.Unpack(er, dst, layertar.UnpackOptions{Overlay: true, Exact: true, Budget: budget}); err != nil {
		return err
	}
	// The archive's end: what follows it is the guest's word on it.
	if _, err := io.Copy(io.Discard, er); err != nil {
		return err
	}
	return nil
}
