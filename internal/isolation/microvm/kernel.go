// Package microvm is the microVM isolation driver: each sandbox in a
// virtual machine of its own under QEMU's microvm machine (KVM where the
// host has /dev/kvm, QEMU's software emulation elsewhere), with a guest
// kernel from Debian and Cove's sandbox binary as its init and agent.
package microvm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// DefaultKernelDir is where `make` unpacks Debian's cloud kernel
// (scripts/guest-kernel.sh): boot/vmlinuz-<release> and
// lib/modules/<release>.
const DefaultKernelDir = "/var/cache/cove-microvm/kernel"

// Kernel is a guest kernel: its image and its modules.
type Kernel struct {
	Image   string // the bzImage QEMU boots
	Modules string // lib/modules/<release>
	Release string
}

// FindKernel finds the one kernel unpacked under dir.
func FindKernel(dir string) (Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) != 1 {
		return Kernel{}, errs.New(errs.Unavailable, "no guest kernel in %s (found %d): make installs Debian's (scripts/guest-kernel.sh)", dir, len(images))
	}
	release := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
	mods := filepath.Join(dir, "lib", "modules", release)
	if st, err := os.Stat(mods); err != nil || !st.IsDir() {
		return Kernel{}, fmt.Errorf("the guest kernel %s has no modules at %s", release, mods)
	}
	return Kernel{Image: images[0], Modules: mods, Release: release}, nil
}
