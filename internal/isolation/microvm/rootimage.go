package microvm

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MakeRootImage writes an ext4 image of the tree at dir to img (mke2fs
// copies it; nothing is mounted on the host), sized for the tree with
// room to spare.
func MakeRootImage(ctx context.Context, dir, img string) error {
	var size int64
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		files++
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			size += (info.Size() + 4095) &^ 4095
		}
		return nil
	})
	if err != nil {
		return err
	}
	mb := max(16, (size*5/4+int64(files)*256)>>20+8)
	out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-d", dir, "-L", "cove-root",
		"-N", fmt.Sprint(files+1024), img, fmt.Sprintf("%dM", mb)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mkfs.ext4 of %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
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
