package microvm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
)

// TestBoot boots Debian's kernel on QEMU's microvm machine with Cove's
// sandbox binary as its init: the init loads the modules the initramfs
// brings, reports the guest, and powers the machine off. The guest runs
// a kernel of its own (another release, another boot id).
func TestBoot(t *testing.T) {
	kit := newGuestKit(t, t.TempDir())
	k, qemu, initrd := kit.kernel, kit.qemu, kit.initrd

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, qemu, qemuArgs(Machine{Kernel: k, Initrd: initrd, MemoryMB: 256, CPUs: 1, KVM: KVMAvailable()})...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("qemu: %v\n%s", err, out.String())
	}
	t.Logf("booted and powered off in %v (KVM: %v):\n%s", time.Since(start).Round(time.Millisecond), KVMAvailable(), out.String())
	m := regexp.MustCompile(regexp.QuoteMeta(guest.Ready) + ` release=(\S+) boot_id=(\S+) modules=(\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the guest did not report:\n%s", out.String())
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	host, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if m[1] != k.Release || m[1] == unix.ByteSliceToString(uts.Release[:]) || m[2] == strings.TrimSpace(string(host)) {
		t.Errorf("the guest's kernel %s, boot %s; the host's %s, boot %s", m[1], m[2], unix.ByteSliceToString(uts.Release[:]), host)
	}
	if m[3] == "0" {
		t.Errorf("the guest loaded no modules:\n%s", out.String())
	}
}
