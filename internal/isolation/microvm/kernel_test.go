package microvm

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// note is an ELF note: its name (with its NUL), type and description.
func note(name string, typ uint32, desc []byte) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write(le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, uint32(len(name))), uint32(len(desc))), typ))
	b.WriteString(name)
	b.Write(make([]byte, align4(uint64(len(name)))-uint64(len(name))))
	b.Write(desc)
	b.Write(make([]byte, align4(uint64(len(desc)))-uint64(len(desc))))
	return b.Bytes()
}

// elfWithNotes is a 64-bit little-endian ELF executable for machine with
// one PT_NOTE segment holding notes.
func elfWithNotes(machine elf.Machine, notes []byte) []byte {
	le := binary.LittleEndian
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: 1}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	p := elf.Prog64{Type: uint32(elf.PT_NOTE), Off: 64 + 56, Filesz: uint64(len(notes)), Memsz: uint64(len(notes)), Align: 4}
	var b bytes.Buffer
	_ = binary.Write(&b, le, h)
	_ = binary.Write(&b, le, p)
	b.Write(notes)
	return b.Bytes()
}

// TestFindKernel: the guest boots the kernel's ELF when the directory has
// one QEMU can start (x86-64, with a PVH entry note), else the bzImage;
// `make` unpacks Debian's.
func TestFindKernel(t *testing.T) {
	entry := []byte{0x50, 0x08, 0x00, 0x01, 0, 0, 0, 0}
	linux := note("Linux\x00", 6, []byte("linux\x00"))
	for _, tc := range []struct {
		name  string
		elf   []byte // nil: no vmlinux
		isELF bool
	}{
		{"no ELF", nil, false},
		{"a PVH entry after another note", elfWithNotes(elf.EM_X86_64, append(linux, note("Xen\x00", 18, entry)...)), true},
		{"Xen notes without the entry", elfWithNotes(elf.EM_X86_64, append(linux, note("Xen\x00", 6, []byte("linux\x00"))...)), false},
		{"the entry's type under another name", elfWithNotes(elf.EM_X86_64, note("Xem\x00", 18, entry)), false},
		{"another machine", elfWithNotes(elf.EM_AARCH64, note("Xen\x00", 18, entry)), false},
		{"a note cut short", elfWithNotes(elf.EM_X86_64, note("Xen\x00", 18, entry)[:16]), false},
		{"not an ELF", []byte("MZ, something else"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"boot", "lib/modules/6.1.0-test"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			bz := filepath.Join(dir, "boot", "vmlinuz-6.1.0-test")
			if err := os.WriteFile(bz, []byte("bzImage"), 0o644); err != nil {
				t.Fatal(err)
			}
			vmlinux := filepath.Join(dir, "boot", "vmlinux-6.1.0-test")
			if tc.elf != nil {
				if err := os.WriteFile(vmlinux, tc.elf, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			k, err := FindKernel(dir)
			if err != nil {
				t.Fatal(err)
			}
			want := bz
			if tc.isELF {
				want = vmlinux
			}
			if k.Image != want || k.Release != "6.1.0-test" {
				t.Errorf("FindKernel: %+v, want the image %s", k, want)
			}
		})
	}
	// Debian's, as make unpacks it.
	if _, err := os.Stat(DefaultKernelDir); err == nil {
		k, err := FindKernel(DefaultKernelDir)
		if err != nil || filepath.Base(k.Image) != "vmlinux-"+k.Release {
			t.Errorf("the kernel make unpacked: %+v %v, want its ELF (scripts/guest-kernel.sh)", k, err)
		}
	}
}
