package fdbudget

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Process is a budget of the process's descriptor limit (RLIMIT_NOFILE's
// soft limit, read now: raise it first) with DefaultReserve kept back.
func Process() (*Budget, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return nil, fmt.Errorf("descriptor budget: %w", err)
	}
	limit := int(min(r.Cur, 1<<30))
	return New(limit, DefaultReserve(limit))
}
