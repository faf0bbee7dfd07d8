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
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// MakeLayerImage writes a read-only erofs image of the layer at dir to img:
// its files, owners, modes, times and extended attributes (the overlay's
// opaque markers) and its whiteouts (character devices 0:0), as the
// guest's overlay reads them. mkfs.erofs copies the tree; nothing is
// mounted on the host.
func MakeLayerImage(ctx context.Context, dir, img string) error {
	out, err := exec.CommandContext(ctx, "mkfs.erofs", "--quiet", "--preserve-mtime", img, dir).CombinedOutput()
	if err != nil {
		os.Remove(img)
		return fmt.Errorf("mkfs.erofs of %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return os.Chmod(img, 0o600)
}

// imagesDir holds the images of template layers in the driver's
// directory: one per layer, made at the first guest that needs it. No
// sandbox id has a '_'.
const imagesDir = "_images"

// layerImages returns the images of layers (the same order), making those
// not made yet. A layer's directory is named by its content (the template
// store's), so its image is named by the directory's path.
func (d *Driver) layerImages(ctx context.Context, layers []string) ([]string, error) {
	var imgs []string
	for _, layer := range layers {
		sum := sha256.Sum256([]byte(layer))
		img := filepath.Join(d.cfg.Dir, imagesDir, hex.EncodeToString(sum[:16])+".erofs")
		if _, err := os.Stat(img); err != nil {
			if err := d.makeImage(ctx, layer, img); err != nil {
				return nil, err
			}
		}
		imgs = append(imgs, img)
	}
	return imgs, nil
}

// makeImage makes img from layer, once however many creates ask at the
// same time; the image appears whole or not at all. Its layer's path is
// kept beside it (img + ".layer"), for pruneImages.
func (d *Driver) makeImage(ctx context.Context, layer, img string) error {
	d.imageMu.Lock()
	defer d.imageMu.Unlock()
	if _, err := os.Stat(img); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(img+".layer", []byte(layer), 0o600); err != nil {
		return err
	}
	tmp := img + ".tmp"
	if err := MakeLayerImage(ctx, layer, tmp); err != nil {
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

// pruneImages removes the images whose layer is gone (the template store
// deleted it), and what an interrupted make left: at the driver's start
// and after each new image (imageMu held then). A guest that still runs
// on one keeps its open file.
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
		case strings.HasSuffix(name, ".tmp"):
			os.Remove(name)
		case strings.HasSuffix(name, ".erofs"):
			layer, err := os.ReadFile(name + ".layer")
			if err == nil {
				if _, err = os.Stat(string(layer)); err == nil {
					continue
				}
			}
			if errors.Is(err, os.ErrNotExist) {
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
