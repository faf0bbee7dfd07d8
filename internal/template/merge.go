package template

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/fsutil"
)

// MergeLayer stacks upper (a copied writable layer in a stage, consumed)
// onto the stored layer lower and returns a new stage holding what the two
// show stacked, as one layer that takes lower's place: a sandbox paused
// without its memory again and again keeps one saved layer, not one per
// pause. Both trees are the node's own copies: nothing in them is
// followed.
func (s *Store) MergeLayer(lower, upper string) (string, error) {
	defer removeStage(upper)
	out, err := s.StageLayer()
	if err != nil {
		return "", err
	}
	if err := fsutil.CopyTree(s.layers.Path(lower), out, fsutil.CopyOptions{Overlay: true}); err != nil {
		removeStage(out)
		return "", fmt.Errorf("copy layer %s: %w", lower, err)
	}
	if err := applyUpper(upper, out); err != nil {
		removeStage(out)
		return "", fmt.Errorf("merge a saved layer onto %s: %w", lower, err)
	}
	return out, nil
}

// applyUpper applies the layer src onto the layer dst as overlayfs stacks
// them: a whiteout or a non-directory replaces what dst has at its path
// (a whiteout stays, to hide the layers under dst), an opaque directory
// replaces dst's directory, any other directory merges into it.
func applyUpper(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		st, err := os.Lstat(from)
		if err != nil {
			return err
		}
		cur, err := os.Lstat(to)
		exists := err == nil
		if st.IsDir() && !opaqueDir(from) && exists && cur.IsDir() {
			if err := applyUpper(from, to); err != nil {
				return err
			}
			if err := copyMeta(st, to); err != nil {
				return err
			}
			continue
		}
		switch {
		case exists && cur.IsDir():
			if err := fsutil.RemoveTree(to); err != nil {
				return err
			}
		case exists:
			if err := os.Remove(to); err != nil {
				return err
			}
		}
		if err := fsutil.CopyTree(from, to, fsutil.CopyOptions{Overlay: true}); err != nil {
			return err
		}
	}
	return nil
}

func opaqueDir(dir string) bool {
	buf := make([]byte, 1)
	n, err := unix.Lgetxattr(dir, "trusted.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// copyMeta gives dst src's mode, owner and times (a merged directory
// takes the upper one's).
func copyMeta(src os.FileInfo, dst string) error {
	owner := fsutil.Owner(src)
	if err := os.Lchown(dst, int(owner>>32), int(uint32(owner))); err != nil {
		return err
	}
	if err := os.Chmod(dst, src.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
		return err
	}
	t := unix.NsecToTimespec(src.ModTime().UnixNano())
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
}
