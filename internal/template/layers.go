package template

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/layertar"
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
// copies earlier versions made of it for user namespaces
// ("<layer>.shift-<base>"; id-mapped mounts replaced them).
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
// has it wins, and a whiteout, a non-directory or an opaque directory on
// the way hides the lower ones. Layers hold what build steps wrote, so no
// link in them is followed: a layer whose /etc is a symlink (to a host
// directory or anywhere else) has nothing under /etc as far as the host
// is concerned.
func (l Layers) lookup(layers []string, rel string) (fs.FileInfo, bool) {
	_, fi, ok := l.locate(layers, rel)
	return fi, ok
}

// locate is lookup that also names the layer the file is in.
func (l Layers) locate(layers []string, rel string) (string, fs.FileInfo, bool) {
	for i := len(layers) - 1; i >= 0; i-- {
		fi, opaque, err := statInLayer(l.Path(layers[i]), rel)
		switch {
		case err == nil && layertar.IsWhiteout(fi):
			return "", nil, false
		case err == nil:
			return layers[i], fi, true
		case !errors.Is(err, fs.ErrNotExist) || opaque:
			return "", nil, false
		}
	}
	return "", nil, false
}

// errHidden is a path under something that is not a real directory in
// its layer: a file, a whiteout or a symlink.
var errHidden = errors.New("a parent is not a directory")

// statInLayer lstats rel inside one layer directory through an os.Root,
// every parent checked to be a real directory of the layer (never a
// link, followed or not). It also reports whether a parent is opaque.
func statInLayer(dir, rel string) (fs.FileInfo, bool, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	opaque := false
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		parent := strings.Join(parts[:i], "/")
		st, err := root.Lstat(parent)
		if err != nil {
			return nil, opaque, err
		}
		if !st.IsDir() {
			return nil, opaque, errHidden
		}
		opaque = opaque || isOpaque(root, parent)
	}
	fi, err := root.Lstat(rel)
	return fi, opaque, err
}

// readFile reads rel, a regular file, from the topmost layer that has it;
// like lookup it follows no link in the layers.
func (l Layers) readFile(layers []string, rel string) ([]byte, error) {
	layer, fi, ok := l.locate(layers, rel)
	if !ok || !fi.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	root, err := os.OpenRoot(l.Path(layer))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxLayerFileRead))
}

// maxLayerFileRead bounds what the builder reads of a layer's file
// (passwd, group): a template's author chooses its size.
const maxLayerFileRead = 16 << 20

// isOpaque reports an overlayfs directory that hides the lower layers',
// dir relative to root (and checked to be a directory).
func isOpaque(root *os.Root, dir string) bool {
	f, err := root.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 1)
	n, err := unix.Fgetxattr(int(f.Fd()), "trusted.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// removeStage drops a stage that failed half-way.
func removeStage(stage string) { _ = fsutil.RemoveTree(stage) }
