package layertar

import (
	"os"

	"golang.org/x/sys/unix"
)

// mknodWhiteout makes name in d a 0/0 character device.
func mknodWhiteout(d *os.File, name string) error {
	return unix.Mknodat(int(d.Fd()), name, unix.S_IFCHR, 0)
}
