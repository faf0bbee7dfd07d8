package template

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/fsutil"
)

// Layers is the node's content-addressed layer directory: every layer is a
// read-only directory named by a digest of its content, shared by all the
// templates and sandboxes that stack it.
type Layers struct {
	dir string
}

// Path is where the named layer lives.
func (l Layers) Path(name string) string { return filepath.Join(l.dir, name) }

// Has reports whether the named layer is present.
func (l Layers) Has(name string) bool {
	st, err := os.Stat(l.Path(name))
	return err == nil && st.IsDir()
}

// stage makes an empty directory on the layers' file system to fill.
func (l Layers) stage() (string, error) {
	d, err := os.MkdirTemp(l.dir, ".stage-")
	if err != nil {
		return "", err
	}
	return d, os.Chmod(d, 0o755)
}

// commit moves a filled stage into place under name and returns the name.
// When a layer of that name exists already (the same content), the stage
// is dropped.
func (l Layers) commit(stage, name string) (string, error) {
	if l.Has(name) {
		return name, fsutil.RemoveTree(stage)
	}
	if err := os.Rename(stage, l.Path(name)); err != nil {
		if l.Has(name) { // another build stored it first
			return name, fsutil.RemoveTree(stage)
		}
		fsutil.RemoveTree(stage)
		return "", fmt.Errorf("store layer %s: %w", name, err)
	}
	return name, nil
}

// commitByContent names a filled stage by the hash of its content and
// commits it; an empty stage is no layer ("").
func (l Layers) commitByContent(stage string) (string, error) {
	entries, err := os.ReadDir(stage)
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "", fsutil.RemoveTree(stage)
	}
	sum, err := hashTree(stage)
	if err != nil {
		fsutil.RemoveTree(stage)
		return "", fmt.Errorf("hash layer: %w", err)
	}
	return l.commit(stage, "sha256-"+sum)
}

// remove deletes a layer that nothing uses any more, with the id-shifted
// copies drivers made of it for user namespaces ("<layer>.shift-<base>").
func (l Layers) remove(name string) error {
	copies, _ := filepath.Glob(l.Path(name) + ".shift-*")
	for _, c := range append(copies, l.Path(name)) {
		if err := fsutil.RemoveTree(c); err != nil {
			return err
		}
	}
	return nil
}

// list names every stored layer.
func (l Layers) list() ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "sha256-") && !strings.Contains(e.Name(), ".shift-") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// lookup finds rel (a clean path relative to the root) in a stack of
// layers (lowest first) the way overlayfs would: the topmost layer that
// has it wins, and a whiteout on the way hides the lower ones.
func (l Layers) lookup(layers []string, rel string) (fs.FileInfo, bool) {
	for i := len(layers) - 1; i >= 0; i-- {
		p := filepath.Join(l.Path(layers[i]), rel)
		st, err := os.Lstat(p)
		if err == nil {
			if isWhiteout(st) {
				return nil, false
			}
			return st, true
		}
		// A whiteout or a non-directory at a parent hides the rest.
		for parent := path.Dir(rel); parent != "." && parent != "/"; parent = path.Dir(parent) {
			pp := filepath.Join(l.Path(layers[i]), parent)
			if pst, err := os.Lstat(pp); err == nil && (!pst.IsDir() || isWhiteout(pst) || isOpaque(pp)) {
				return nil, false
			}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
	}
	return nil, false
}

// readFile reads rel from the topmost layer that has it.
func (l Layers) readFile(layers []string, rel string) ([]byte, error) {
	for i := len(layers) - 1; i >= 0; i-- {
		p := filepath.Join(l.Path(layers[i]), rel)
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if isWhiteout(st) || !st.Mode().IsRegular() {
			break
		}
		return os.ReadFile(p)
	}
	return nil, fs.ErrNotExist
}

// isOpaque reports an overlayfs directory that hides the lower layers'.
func isOpaque(dir string) bool {
	buf := make([]byte, 1)
	n, err := unix.Lgetxattr(dir, "trusted.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// isWhiteout reports an overlayfs whiteout: a 0/0 character device.
func isWhiteout(st fs.FileInfo) bool {
	return st.Mode()&fs.ModeCharDevice != 0 && st.Mode()&fs.ModeDevice != 0 && rdev(st) == 0
}

func rdev(st fs.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Rdev
	}
	return 1
}

// removeStage drops a stage that failed half-way.
func removeStage(stage string) { _ = fsutil.RemoveTree(stage) }
