package microvm

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/cavaliergopher/cpio"
)

// Where the guest init finds what the initramfs brings.
const (
	guestInit       = "/init"
	guestModulesDir = "/lib/modules"
	guestModuleList = "/cove/modules" // the modules to load, in order, one path a line
)

// guestModules are the kernel modules the guest init loads (with what
// they need): Debian's cloud kernel builds the virtio transport of QEMU's
// microvm machine, its disks and network, and overlayfs as modules.
var guestModules = []string{"virtio_mmio", "virtio_blk", "virtio_net", "overlay", "erofs", "qemu_fw_cfg", "virtiofs", "virtio_balloon"}

// WriteInitramfs writes the guest's initramfs (a newc cpio archive) to w:
// the sandbox binary as /init and the modules it loads, from the kernel's.
func WriteInitramfs(w io.Writer, k Kernel, sandboxBinary string) error {
	all, err := modules(k.Modules)
	if err != nil {
		return err
	}
	order, err := loadOrder(all, guestModules...)
	if err != nil {
		return err
	}
	cw := cpio.NewWriter(w)
	for _, dir := range []string{"/dev", "/proc", "/sys", "/lib", guestModulesDir, "/cove"} {
		if err := cw.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(dir, "/"), Mode: cpio.TypeDir | 0o755, Links: 2}); err != nil {
			return err
		}
	}
	if err := addFile(cw, guestInit, sandboxBinary, 0o755); err != nil {
		return err
	}
	var list strings.Builder
	for _, p := range order {
		in := path.Join(guestModulesDir, path.Base(p))
		if err := addFile(cw, in, p, 0o644); err != nil {
			return err
		}
		list.WriteString(in + "\n")
	}
	if err := cw.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(guestModuleList, "/"), Mode: cpio.TypeReg | 0o644, Size: int64(list.Len()), Links: 1}); err != nil {
		return err
	}
	if _, err := io.WriteString(cw, list.String()); err != nil {
		return err
	}
	return cw.Close()
}

func addFile(cw *cpio.Writer, name, from string, mode cpio.FileMode) error {
	f, err := os.Open(from)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := cw.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(name, "/"), Mode: cpio.TypeReg | mode, Size: st.Size(), Links: 1}); err != nil {
		return err
	}
	if n, err := io.Copy(cw, f); err != nil || n != st.Size() {
		return fmt.Errorf("pack %s: %d of %d bytes: %v", from, n, st.Size(), err)
	}
	return nil
}
