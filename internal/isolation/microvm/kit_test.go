package microvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// guestKit is what booting a guest needs: QEMU, the guest kernel, the
// sandbox binary (bin/cove-sandbox) and an initramfs of them in dir.
type guestKit struct {
	qemu, sandboxBinary, initrd string
	kernel                      Kernel
}

func newGuestKit(t *testing.T, dir string) guestKit {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("no qemu-system-x86_64: make test installs Debian's qemu-system-x86 (scripts/deps.sh)")
	}
	k, err := FindKernel(DefaultKernelDir)
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "../../../bin/cove-sandbox")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no bin/cove-sandbox: make test builds it")
	}
	initrd := filepath.Join(dir, "initramfs.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteInitramfs(f, k, bin); err != nil {
		t.Fatal(err)
	}
	return guestKit{qemu: qemu, sandboxBinary: bin, initrd: initrd, kernel: k}
}
