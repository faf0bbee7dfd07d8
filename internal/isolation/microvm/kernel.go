// Package microvm is the microVM isolation driver: each sandbox in a
// virtual machine of its own under QEMU's microvm machine (KVM where the
// host has /dev/kvm, QEMU's software emulation elsewhere), with a guest
// kernel from Debian and Cove's sandbox binary as its init and agent.
package microvm

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// DefaultKernelDir is where `make` unpacks Debian's cloud kernel
// (scripts/guest-kernel.sh): boot/vmlinuz-<release>, its payload
// unpacked as boot/vmlinux-<release>, and lib/modules/<release>.
const DefaultKernelDir = "/var/cache/cove-microvm/kernel"

// Kernel is a guest kernel: its image and its modules.
type Kernel struct {
	// Image is what QEMU boots: the kernel's ELF (vmlinux), started at its
	// PVH entry, when the directory has one with that entry, else the
	// bzImage, which decompresses itself in the guest (about half a
	// second more per boot under TCG: a median of 2045 against 1510 ms
	// to the kernel's panic at a missing init, 10 boots each).
	Image   string
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
	k := Kernel{Image: images[0], Modules: mods, Release: release}
	if elf := filepath.Join(dir, "boot", "vmlinux-"+release); hasPVHEntry(elf) {
		k.Image = elf
	}
	return k, nil
}

// hasPVHEntry reports whether the file at path is an x86-64 ELF with a
// PVH entry point (a "Xen" note of type XEN_ELFNOTE_PHYS32_ENTRY, 18),
// which QEMU needs to boot an ELF kernel.
func hasPVHEntry(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return false
	}
	const phys32Entry = 18
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > 1<<20 {
			continue
		}
		notes := make([]byte, p.Filesz)
		if _, err := p.ReadAt(notes, 0); err != nil {
			continue
		}
		// Each note: name size, description size, type (4 bytes each),
		// then the name and the description, each padded to 4 bytes.
		for len(notes) >= 12 {
			namesz, descsz, typ := f.ByteOrder.Uint32(notes), f.ByteOrder.Uint32(notes[4:]), f.ByteOrder.Uint32(notes[8:])
			name, desc := align4(uint64(namesz)), align4(uint64(descsz))
			if uint64(len(notes)-12) < name+desc {
				break
			}
			if typ == phys32Entry && string(notes[12:12+namesz]) == "Xen\x00" {
				return true
			}
			notes = notes[12+name+desc:]
		}
	}
	return false
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }
