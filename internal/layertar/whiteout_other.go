//go:build !linux

package layertar

import (
	"errors"
	"os"
)

// mknodWhiteout: overlayfs's whiteouts are Linux's.
func mknodWhiteout(*os.File, string) error {
	return errors.New("a whiteout is an overlayfs device, which needs Linux")
}
