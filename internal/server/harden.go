package server

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// kptrRestrict is the kernel setting that hides kernel addresses (printed
// with %pK: /proc/net/tcp's socket pointers, /proc/modules …) from
// processes without CAP_SYSLOG.
const kptrRestrict = "/proc/sys/kernel/kptr_restrict"

// restrictKernelPointers raises kernel.kptr_restrict from 0 to 1, so code
// in sandboxes (which never has CAP_SYSLOG) reads no kernel address that
// would help an exploit of the shared kernel. It is host-wide and stays
// after the server: the host's own tools run with CAP_SYSLOG and still
// see the addresses. A stricter value is left as it is.
func restrictKernelPointers(log *slog.Logger) error {
	b, err := os.ReadFile(kptrRestrict)
	if err != nil {
		return fmt.Errorf("read %s: %w", kptrRestrict, err)
	}
	if strings.TrimSpace(string(b)) != "0" {
		return nil
	}
	if err := os.WriteFile(kptrRestrict, []byte("1"), 0); err != nil {
		return fmt.Errorf("hide kernel addresses from sandboxes (%s): %w", kptrRestrict, err)
	}
	log.Info("kernel addresses hidden from processes without CAP_SYSLOG", "sysctl", "kernel.kptr_restrict=1")
	return nil
}
