package httpapi

import (
	"io/fs"
	"syscall"
	"time"
)

// fileTimes are a file's access, modification and change times.
func fileTimes(fi fs.FileInfo) (atime, mtime, ctime time.Time) {
	st := fi.Sys().(*syscall.Stat_t)
	return time.Unix(st.Atim.Unix()).UTC(), time.Unix(st.Mtim.Unix()).UTC(), time.Unix(st.Ctim.Unix()).UTC()
}
