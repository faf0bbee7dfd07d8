package microvm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
)

// Machine is what a guest gets.
type Machine struct {
	Kernel   Kernel
	Initrd   string
	MemoryMB int64
	CPUs     int
	// KVM runs the guest on the host's processors; without, QEMU emulates
	// them (TCG): the same guest, many times slower.
	KVM bool
	// Layers are the images of the root's layers (read-only, shared by
	// guests; lowest first), the disks guest.LayerSerial(i).
	Layers []string
	// Binds are the images of the read-only binds served from disks
	// (erofs, shared by guests), the disks guest.BindSerial(i).
	Binds []string
	// Config is the guest.Config file and Tap the tap device (in QEMU's
	// network namespace) that is the guest's eth0; each may be empty.
	Config, Tap string
	// Writable, when set, is the guest's writable disk (its root's
	// writes): a raw image the guest formats and the host never mounts.
	Writable string
	// Console, when set, is the unix socket QEMU serves the serial
	// console on; the guest runs once a client is attached. Else the
	// console is QEMU's standard output.
	Console string
	// QMP, when set, is the unix socket QEMU's monitor listens on.
	QMP string
	// User, when set, is the host uid and gid QEMU drops to once it has
	// opened what it needs, chrooted into Jail, an empty directory.
	User uint32
	Jail string
	// Incoming, when set, is where QEMU reads a saved machine from
	// (QEMU's -incoming, "fd:N"): it runs that instead of booting, and
	// leaves it stopped. With a private MemoryFile QEMU waits for the
	// node to start the read (incomingDeferred).
	Incoming string
	// MemoryFile, when set, is a file that is the guest's memory: written
	// through (MemoryShared: a boot snapshot's guest, whose save then
	// holds its devices alone), or mapped copy-on-write (a guest started
	// from that snapshot: every such guest shares the file's pages until
	// it writes them).
	MemoryFile   string `json:",omitempty"`
	MemoryShared bool   `json:",omitempty"`
	// NamedMemory names the guest's memory as a MemoryFile guest's is:
	// a machine saved from one is read back into plain memory.
	NamedMemory bool `json:",omitempty"`
	// NoPageReporting keeps the pages the guest frees: a boot snapshot's
	// guests, whose memory is the snapshot's file mapped copy-on-write,
	// where QEMU 7.2 would hand a freed page back by punching a hole in
	// the file, which the other guests of the snapshot read (seen with
	// strace: fallocate(PUNCH_HOLE) on it).
	NoPageReporting bool `json:",omitempty"`
	// diskFDs, set by Start, are the descriptors QEMU inherits for each
	// disk image (read-only, and read-write for the writable disk), as
	// fd sets: QEMU opens a disk again with other flags (a save makes its
	// disks read-only, a restore writable), which in its empty root it can
	// only do from them. QEMU's own image locks are off then: a set's
	// descriptors share their locks with each copy QEMU takes of them, so
	// the read-only one would keep the writable one from its lock; the node
	// gives each writable disk to one QEMU.
	diskFDs map[string][]int
	// Shares are virtiofs devices: a tag and the vhost-user socket of the
	// virtiofsd that serves it. The guest's memory is then shared memory
	// (memfd), which vhost-user needs.
	Shares []Share
}

// incomingDeferred: QEMU reads the saved machine when the node says so
// (migrate-incoming), once it has told QEMU that the memory is not in it
// (x-ignore-shared): a guest started from a boot snapshot, whose memory
// is the snapshot's file.
func (m Machine) incomingDeferred() bool { return m.MemoryFile != "" && !m.MemoryShared }

// plainMemory is m for a guest that reads back a machine saved from m's
// guest: a guest started from a boot snapshot saves all its memory, which
// goes into plain memory of the same name.
func (m Machine) plainMemory() Machine {
	if m.MemoryFile != "" {
		m.MemoryFile, m.MemoryShared, m.NamedMemory = "", false, true
	}
	return m
}

// Share is a virtiofs device of a guest.
type Share struct{ Tag, Socket string }

// KVMAvailable reports whether this host can run guests under KVM:
// /dev/kvm opens, and it is not only PVM's. A host whose KVM is PVM alone
// (kvm_pvm, a kernel that is itself a PVM guest in a nested VM) runs only
// guest kernels built for PVM: an ordinary kernel stops at its first
// privileged instruction ("kvm-pvm: INTERNAL_ERROR in batch emul") and
// never boots, so such a host emulates its guests as one without KVM.
func KVMAvailable() bool {
	return kvmOpens("/dev/kvm") && !onlyPVM("/sys/module")
}

func kvmOpens(dev string) bool {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// onlyPVM reports whether the kernel's KVM is PVM's alone: kvm_pvm is
// there, and neither hardware flavour (kvm_intel, kvm_amd).
func onlyPVM(modules string) bool {
	has := func(name string) bool { _, err := os.Stat(filepath.Join(modules, name)); return err == nil }
	return has("kvm_pvm") && !has("kvm_intel") && !has("kvm_amd")
}

// tcgCacheMB is the size of QEMU's cache of translated code under TCG.
const tcgCacheMB = 128

// qemuArgs are qemu-system-x86_64's arguments for m on QEMU's microvm
// machine: no firmware, no PCI, no default devices; the serial console on
// standard output; a reboot or a kernel panic ends QEMU.
func qemuArgs(m Machine) []string {
	// Huge pages only where a process asks for them (madvise): in a
	// machine of 512 MiB or more Debian's kernel gives them to any large
	// enough mapping, and an idle guest's Go agent and init then held 12
	// to 16 MiB more of the host's memory (measured under TCG: the
	// guest's memory in QEMU fell from 134 to 121 MiB).
	cmdline := []string{"console=ttyS0", "rdinit=/init", "panic=-1", "reboot=t", "quiet", "transparent_hugepage=madvise"}
	accel := "kvm"
	if !m.KVM {
		// Emulated, the kernel's TSC calibration can hang ("Marking TSC
		// unstable"): give it the frequency.
		cmdline = append(cmdline, "tsc_early_khz=2000000", "no_timer_check")
		// The translated code's cache, which counts against the VM's
		// cgroup: QEMU's default is 1 GiB.
		accel = "tcg,tb-size=" + strconv.Itoa(tcgCacheMB)
	}
	machine := "microvm,x-option-roms=off,rtc=on,isa-serial=on"
	var memory []string
	size := ",size=" + strconv.FormatInt(m.MemoryMB, 10) + "M"
	switch {
	case len(m.Shares) > 0:
		memory = []string{"-object", "memory-backend-memfd,id=mem,share=on" + size}
	case m.MemoryFile != "":
		share := "off"
		if m.MemoryShared {
			share = "on"
		}
		memory = []string{"-object", "memory-backend-file,id=mem,mem-path=" + m.MemoryFile + ",share=" + share + size}
	case m.NamedMemory:
		memory = []string{"-object", "memory-backend-ram,id=mem" + size}
	}
	if memory != nil {
		machine += ",memory-backend=mem"
	}
	// Without set*id calls QEMU could not drop to User; past the drop it
	// has no capabilities and no_new_privs: no way back up.
	elevate := "deny"
	if m.User != 0 {
		elevate = "allow"
	}
	args := []string{
		"-M", machine, "-accel", accel,
		"-m", strconv.FormatInt(m.MemoryMB, 10), "-smp", strconv.Itoa(m.CPUs),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		// QEMU's own seccomp filter: a guest that takes its device
		// emulation over cannot gain privileges, spawn programs or change
		// its resources and scheduling.
		"-sandbox", "on,obsolete=deny,elevateprivileges=" + elevate + ",spawn=deny,resourcecontrol=deny",
		// Modern virtio over MMIO (1.0): vhost-user (virtiofsd) refuses the
		// legacy devices microvm makes by default.
		"-global", "virtio-mmio.force-legacy=false",
		"-kernel", m.Kernel.Image, "-initrd", m.Initrd, "-append", strings.Join(cmdline, " "),
	}
	if m.User != 0 {
		id := strconv.FormatUint(uint64(m.User), 10)
		args = append(args, "-runas", id+":"+id, "-chroot", m.Jail)
	}
	if m.Console != "" {
		args = append(args, "-chardev", "socket,id=console,path="+m.Console+",server=on,wait=on", "-serial", "chardev:console")
	} else {
		args = append(args, "-serial", "stdio")
	}
	if m.Incoming != "" {
		in := m.Incoming
		if m.incomingDeferred() {
			in = "defer"
		}
		args = append(args, "-incoming", in, "-S")
	}
	if m.QMP != "" {
		args = append(args, "-qmp", "unix:"+m.QMP+",server=on,wait=off")
	}
	args = append(args, memory...)
	for i, sh := range m.Shares {
		id := "fs" + strconv.Itoa(i)
		args = append(args, "-chardev", "socket,id="+id+",path="+sh.Socket, "-device", "vhost-user-fs-device,chardev="+id+",tag="+sh.Tag)
	}
	sets := 0
	file := func(img string) string { // the image's path, or its fd set
		fds := m.diskFDs[img]
		if len(fds) == 0 {
			return img
		}
		sets++
		set := strconv.Itoa(sets)
		for _, fd := range fds {
			args = append(args, "-add-fd", "fd="+strconv.Itoa(fd)+",set="+set)
		}
		return "/dev/fdset/" + set + ",file.locking=off"
	}
	for i, img := range m.Layers {
		id := "layer" + strconv.Itoa(i)
		args = append(args, "-drive", "file="+file(img)+",if=none,id="+id+",format=raw,readonly=on",
			"-device", "virtio-blk-device,drive="+id+",serial="+guest.LayerSerial(i))
	}
	for i, img := range m.Binds {
		id := "bind" + strconv.Itoa(i)
		args = append(args, "-drive", "file="+file(img)+",if=none,id="+id+",format=raw,readonly=on",
			"-device", "virtio-blk-device,drive="+id+",serial="+guest.BindSerial(i))
	}
	if m.Writable != "" { // deletes in the guest free the host's blocks
		args = append(args, "-drive", "file="+file(m.Writable)+",if=none,id=rw,format=raw,discard=unmap",
			"-device", "virtio-blk-device,drive=rw,serial="+guest.WritableSerial)
	}
	// The guest hands the pages it frees back (free page reporting):
	// the host's memory follows what the guest uses, not what it once
	// touched.
	reporting := "on"
	if m.NoPageReporting {
		reporting = "off"
	}
	args = append(args, "-device", "virtio-balloon-device,free-page-reporting="+reporting)
	if m.Config != "" {
		args = append(args, "-fw_cfg", "name="+guest.ConfigName+",file="+m.Config)
	}
	if m.Tap != "" {
		args = append(args, "-netdev", "tap,id=net0,ifname="+m.Tap+",script=no,downscript=no",
			"-device", "virtio-net-device,netdev=net0")
	}
	return args
}
