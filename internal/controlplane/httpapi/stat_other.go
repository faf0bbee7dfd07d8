//go:build !linux

package httpapi

import (
	"io/fs"
	"time"
)

// fileTimes: the modification time for all three where Linux's stat
// fields are not (volumes are Linux's anyway).
func fileTimes(fi fs.FileInfo) (atime, mtime, ctime time.Time) {
	t := fi.ModTime().UTC()
	return t, t, t
}
