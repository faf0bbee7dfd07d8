package microvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
)

// MakeLayerImage writes a read-only erofs image of the layer at dir to img:
// its files, owners, modes, times and extended attributes (the overlay's
// opaque markers) and its whiteouts (character devices 0:0), as the
// guest's overlay reads them. mkfs.erofs copies the tree; nothing is
// mounted on the host.
func MakeLayerImage(ctx context.Context, dir, img string) error {
	return makeErofs(ctx, dir, img, false)
}

// makeErofs writes an erofs image of the tree at dir to img (0600), with
// its files' owners, modes, times and extended attributes, and mkfs.erofs'
// options opts; a failed make leaves no img. A make in the background
// runs at the lowest CPU and I/O priority: it yields to the guests.
func makeErofs(ctx context.Context, dir, img string, background bool, opts ...string) error {
	args := append([]string{"--quiet", "--preserve-mtime"}, opts...)
	cmd := exec.CommandContext(ctx, "mkfs.erofs", append(args, img, dir)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err == nil && background {
		// mkfs.erofs has started no thread yet: those it starts inherit
		// the priority.
		err = lowPriority(cmd.Process.Pid)
		if err != nil {
			_ = cmd.Process.Kill()
		}
	}
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		os.Remove(img)
		return fmt.Errorf("mkfs.erofs of %s: %w: %s", dir, err, strings.TrimSpace(out.String()))
	}
	return os.Chmod(img, 0o600)
}

// lowPriority gives process pid the lowest CPU priority (nice 19) and the
// idle I/O class (ioprio_set: IOPRIO_WHO_PROCESS, IOPRIO_CLASS_IDLE).
func lowPriority(pid int) error {
	if err := unix.Setpriority(unix.PRIO_PROCESS, pid, 19); err != nil {
		return fmt.Errorf("nice: %w", err)
	}
	const whoProcess, classIdle, classShift = 1, 3, 13
	if _, _, e := unix.Syscall(unix.SYS_IOPRIO_SET, whoProcess, uintptr(pid), classIdle<<classShift); e != 0 {
		return fmt.Errorf("ioprio_set: %w", e)
	}
	return nil
}

// imagesDir holds the images of template layers in the driver's
// directory: one per layer, made at the first guest that needs it. No
// sandbox id has a '_'.
const imagesDir = "_images"

// layerImages returns the images of layers (lowest first), making those
// not made yet: one per layer, but for a root of more than max layers,
// whose lowest ones share one image (their merged tree), so that the
// guest takes max disks. A layer's directory is named by its content
// (the template store's), so an image is named by its layers' paths.
func (d *Driver) layerImages(ctx context.Context, layers []string, max int) ([]string, error) {
	if max < 1 {
		return nil, errs.New(errs.InvalidArgument, "a guest has no disk left for its layers")
	}
	groups := [][]string{}
	if n := len(layers) - max + 1; n > 1 {
		groups = append(groups, layers[:n])
		layers = layers[n:]
	}
	for _, l := range layers {
		groups = append(groups, []string{l})
	}
	var imgs []string
	for _, g := range groups {
		sum := sha256.Sum256([]byte(strings.Join(g, "\n")))
		img := filepath.Join(d.cfg.Dir, imagesDir, hex.EncodeToString(sum[:16])+".erofs")
		if _, err := os.Stat(img); err != nil {
			if err := d.makeImage(ctx, g, img); err != nil {
				return nil, err
			}
		}
		imgs = append(imgs, img)
	}
	return imgs, nil
}

// makeImage makes img from layers (one, or the lowest of a root, merged),
// once however many creates ask at the same time; the image appears whole
// or not at all. Its layers' paths are kept beside it (img + ".layer",
// one a line), for pruneImages.
func (d *Driver) makeImage(ctx context.Context, layers []string, img string) error {
	d.imageMu.Lock()
	defer d.imageMu.Unlock()
	if _, err := os.Stat(img); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(img+".layer", []byte(strings.Join(layers, "\n")), 0o600); err != nil {
		return err
	}
	tmp := img + ".tmp"
	err := d.makeMerged(layers, func(tree string) error { return MakeLayerImage(ctx, tree, tmp) })
	if err != nil {
		if ctx.Err() != nil {
			return errs.Mark(errs.Canceled, ctx.Err())
		}
		return err
	}
	if err := os.Rename(tmp, img); err != nil {
		return err
	}
	// A new layer: the store may have removed others since.
	return d.pruneImages()
}

// makeMerged calls build with the tree of layers: the layer itself, or
// their read-only overlay (the host's own, as the namespaces driver
// mounts a root; the top layer last in layers), mounted for the call only.
func (d *Driver) makeMerged(layers []string, build func(tree string) error) error {
	if len(layers) == 1 {
		return build(layers[0])
	}
	mnt, err := os.MkdirTemp(filepath.Join(d.cfg.Dir, imagesDir), "merge-*.mnt")
	if err != nil {
		return err
	}
	lower := slices.Clone(layers)
	slices.Reverse(lower) // overlayfs takes the top first
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, "lowerdir="+strings.Join(lower, ":")); err != nil {
		os.Remove(mnt)
		return fmt.Errorf("merge %d layers: %w", len(layers), err)
	}
	err = build(mnt)
	return errors.Join(err, unmountDir(mnt))
}

// unmountDir unmounts the mount at dir and removes the directory, which
// it then finds empty (os.Remove removes no tree).
func unmountDir(dir string) error {
	if err := unix.Unmount(dir, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return os.Remove(dir)
}

// pruneImages removes the images one of whose layers is gone (the
// template store deleted it), and what an interrupted make left: at the
// driver's start and after each new image (imageMu held then). A guest
// that still runs on one keeps its open file.
func (d *Driver) pruneImages() error {
	dir := filepath.Join(d.cfg.Dir, imagesDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), bindImagePrefix): // bindImages' own
		case strings.HasSuffix(name, ".tmp"):
			os.Remove(name)
		case strings.HasSuffix(name, ".mnt"): // a merge a crash cut short
			if err := unmountDir(name); err != nil {
				return err
			}
		case strings.HasSuffix(name, ".erofs"):
			if !layersThere(name + ".layer") {
				os.Remove(name)
				os.Remove(name + ".layer")
			}
		case strings.HasSuffix(name, ".layer"):
			if _, err := os.Stat(strings.TrimSuffix(name, ".layer")); errors.Is(err, os.ErrNotExist) {
				os.Remove(name) // its image was never made
			}
		}
	}
	return nil
}

// layersThere reads the layers an image was made of and reports whether
// each is still there (a missing list: none is).
func layersThere(list string) bool {
	b, err := os.ReadFile(list)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if _, err := os.Stat(l); errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return true
}

// MakeWritableImage writes an empty ext4 image of size bytes to img, a
// guest's writable disk: sparse, no journal (it lives as long as its
// guest), nothing reserved for root.
func MakeWritableImage(ctx context.Context, img string, size int64) error {
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0",
		"-E", "lazy_itable_init=1,nodiscard", img, fmt.Sprintf("%dk", size>>10)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 of the writable disk: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return os.Chmod(img, 0o600)
}
