package server

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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

// nrOpen is the most descriptors the kernel lets a process hold.
const nrOpen = "/proc/sys/fs/nr_open"

// raiseFileLimit lifts the process's RLIMIT_NOFILE, soft and hard, to the
// kernel's most (fs.nr_open) where it may (root), else the soft one to the
// hard: the egress proxy, the sandbox proxy and the agents' connections
// hold descriptors for every tenant, and the egress proxy's own bound
// (network.FlowLimits) is a share of this limit.
func raiseFileLimit(log *slog.Logger) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err != nil {
		return
	}
	want := cur
	if b, err := os.ReadFile(nrOpen); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > want.Max {
			want.Max = n
		}
	}
	want.Cur = want.Max
	if want == cur {
		return
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		// Without CAP_SYS_RESOURCE: up to the hard limit only.
		if want = (unix.Rlimit{Cur: cur.Max, Max: cur.Max}); want == cur || unix.Setrlimit(unix.RLIMIT_NOFILE, &want) != nil {
			return
		}
	}
	log.Debug("descriptor limit raised", "from", cur.Cur, "to", want.Cur)
}
