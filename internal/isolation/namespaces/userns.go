package namespaces

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/covesandbox/cove/internal/fsutil"
)

// User namespace sandboxes map their ids 0..userNSSize-1 to
// Config.UserNSBase.. on the host: their root is an unprivileged host user.
const userNSSize = 65536

// DefaultUserNSBase is the first host id of user-namespaced sandboxes.
const DefaultUserNSBase = 1 << 30

// shiftedLayer returns a copy of layer whose owners are shifted into the
// user namespaces' range, made once and shared by every such sandbox.
// Without it the layer's files would belong to ids the namespace does not
// map, and its root could not write to its own home.
func (d *Driver) shiftedLayer(layer string) (string, error) {
	dst := layer + ".shift-" + strconv.FormatUint(uint64(d.cfg.UserNSBase), 10)
	d.shiftMu.Lock()
	defer d.shiftMu.Unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	tmp := dst + ".tmp"
	if _, err := os.Lstat(tmp); err == nil {
		if err := fsutil.RemoveTree(tmp); err != nil {
			return "", err
		}
	}
	if err := fsutil.CopyTree(layer, tmp, fsutil.CopyOptions{Shift: d.cfg.UserNSBase, Overlay: true}); err != nil {
		return "", fmt.Errorf("shift layer %s: %w", filepath.Base(layer), err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	return dst, nil
}
