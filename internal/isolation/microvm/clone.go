package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
)

var _ isolation.Cloner = (*Driver)(nil)

// Files of an image (Image) beside its memoryImage: the source's record
// and a copy of its writable disk, which its kernel has mounted.
const (
	sourceRecord = "source.json"
	writableCopy = "writable.ext4"
)

// Image implements isolation.Cloner: QEMU writes the stopped machine to
// dir and the node copies its writable disk beside it (the guest's kernel
// has that file system mounted: the copy must be the disk, block for
// block, not its files); then the guest goes on as it was (paused stays
// paused). A guest with shares cannot be copied (Unimplemented).
func (d *Driver) Image(ctx context.Context, id, dir string) error {
	_, err := d.saveGuest(ctx, id, dir, true, func() error {
		rec, err := readRecordFile(filepath.Join(d.dir(id), recordFile))
		if err != nil {
			return err
		}
		// Stopped: its disk is as its memory has it.
		if err := copySparse(filepath.Join(d.dir(id), writableImage), filepath.Join(dir, writableCopy)); err != nil {
			return err
		}
		return fsutil.WriteJSON(filepath.Join(dir, sourceRecord), rec)
	})
	if err != nil {
		return fmt.Errorf("copy sandbox %s's guest: %w", id, err)
	}
	return nil
}

// Clone implements isolation.Cloner: a new QEMU runs the machine image
// holds, on its source's layers and a copy of its writable disk (spec's
// root shows those files; the guest's kernel needs the disk itself), in
// spec's network namespace. It keeps its source's machine (memory, vCPUs)
// and takes spec's host limits, its own address, host name and clock.
func (d *Driver) Clone(ctx context.Context, id string, spec isolation.Spec, image string) (isolation.Handle, error) {
	return d.clone(ctx, id, spec, image, false)
}

// clone is Clone of image, which is a boot snapshot (bootSnapshot) when
// fromSnapshot: its guest's memory is then the snapshot's file, mapped
// copy-on-write, where a fork's copy holds all of it.
func (d *Driver) clone(ctx context.Context, id string, spec isolation.Spec, image string, fromSnapshot bool) (h isolation.Handle, err error) {
	if err := isolation.ValidateID(id); err != nil {
		return h, err
	}
	src, err := readRecordFile(filepath.Join(image, sourceRecord))
	if err != nil {
		return h, errs.New(errs.InvalidArgument, "a copy of a guest: %v", err)
	}
	if d.binds != nil && !fromSnapshot { // its bind images stay until its record names them (Create holds the lock for a snapshot's)
		d.binds.use.RLock()
		defer d.binds.use.RUnlock()
	}
	if err := checkSavedShares(filepath.Join(d.cfg.Dir, imagesDir), src.Shares); err != nil {
		return h, err
	}
	if err := d.packInitramfs(); err != nil {
		return h, err
	}
	mem, err := os.Open(filepath.Join(image, memoryImage))
	if err != nil {
		return h, err
	}
	defer mem.Close()
	dir, cg, undo, err := d.prepare(id, spec.Limits.CPUMillis, src.Machine.MemoryMB)
	if err != nil {
		return h, err
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	machine := src.Machine
	if !fromSnapshot {
		machine = machine.plainMemory()
	}
	machine.Writable = filepath.Join(dir, writableImage)
	if err := copySparse(filepath.Join(image, writableCopy), machine.Writable); err != nil {
		return h, err
	}
	g := src.Guest
	g.Hostname = id
	vm, err := Start(ctx, VMSpec{
		Dir: dir, QEMU: d.cfg.QEMU, Virtiofsd: d.cfg.Virtiofsd, Machine: machine,
		Layers: src.Layers, Shares: src.Shares, NetNS: spec.NetNS, Cgroup: cg, Guest: g, Incoming: mem,
	})
	if err != nil {
		return h, fmt.Errorf("clone sandbox %s: %w", id, err)
	}
	rec := vm.Record()
	rec.Cgroup, rec.Limits, rec.Machine, rec.Layers, rec.Shares, rec.Guest = cg.Name(), src.Limits, machine, src.Layers, src.Shares, g
	err = fsutil.WriteJSON(filepath.Join(dir, recordFile), rec)
	if err == nil {
		err = d.wake(ctx, vm, src.Pool, id)
	}
	if err != nil {
		vm.Stop()
		return h, fmt.Errorf("clone sandbox %s: %w", id, err)
	}
	d.mu.Lock()
	d.vms[id] = &sandboxVM{vm: vm, cg: cg, limits: src.Limits, shares: src.Shares}
	d.mu.Unlock()
	q := rec.Processes[0]
	return isolation.Handle{ID: id, Driver: d.Name(), PID: q.PID, StartTime: q.StartTime, CreatedAt: time.Now().UTC()}, nil
}

// readRecordFile reads a Record.
func readRecordFile(path string) (Record, error) {
	var rec Record
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		return rec, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return rec, nil
}

// copySparse copies the disk image src to dst (new), a clone of its
// blocks where the file system shares them, else only its data: holes
// stay holes.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
		return nil
	}
	if err := out.Truncate(st.Size()); err != nil {
		return err
	}
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) { // holes to the end
			break
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, data), io.NewSectionReader(in, data, hole-data)); err != nil {
			return err
		}
		off = hole
	}
	return out.Sync()
}
