package microvm

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOnlyPVM: a KVM that is PVM's alone runs no ordinary guest kernel;
// with a hardware flavour beside it, or without PVM, KVM is KVM.
func TestOnlyPVM(t *testing.T) {
	for _, tc := range []struct {
		modules []string
		want    bool
	}{
		{[]string{"kvm", "kvm_pvm"}, true},
		{[]string{"kvm", "kvm_pvm", "kvm_intel"}, false},
		{[]string{"kvm", "kvm_amd", "kvm_pvm"}, false},
		{[]string{"kvm", "kvm_intel"}, false},
		{nil, false},
	} {
		dir := t.TempDir()
		for _, m := range tc.modules {
			if err := os.Mkdir(filepath.Join(dir, m), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if got := onlyPVM(dir); got != tc.want {
			t.Errorf("modules %v: onlyPVM %v, want %v", tc.modules, got, tc.want)
		}
	}
}
