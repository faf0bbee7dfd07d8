package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/fsutil"
)

// lockDir holds a lock file per range tag in use on the host (/run is
// cleared on reboot; a lock dies with its process).
const lockDir = "/run/cove/networks"

// lockRange takes the host-wide lock of cfg.Range's tag for this node:
// the tag names its nftables table and its veths, so two nodes with the
// same range (or two ranges with one tag) would rebuild each other's rules
// and take each other's interfaces. The second one is refused, told which
// node holds it. unlock releases it (Close does).
func lockRange(cfg Config) (unlock func(), err error) {
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return nil, err
	}
	sweepLocks()
	tag := nodePrefix(cfg.Range)
	desc := "range " + cfg.Range.String() + ", pid " + strconv.Itoa(os.Getpid())
	if cfg.Owner != "" {
		desc += ", " + cfg.Owner
	}
	unlock, holder, err := fsutil.TryLock(filepath.Join(lockDir, tag+".lock"), desc)
	// Another node starting may hold it for a moment, sweeping.
	for try := 0; errors.Is(err, fsutil.ErrLocked) && holder == sweeping && try < 100; try++ {
		time.Sleep(10 * time.Millisecond)
		unlock, holder, err = fsutil.TryLock(filepath.Join(lockDir, tag+".lock"), desc)
	}
	if !errors.Is(err, fsutil.ErrLocked) {
		return unlock, err
	}
	if holder == "" {
		holder = "a node that is starting"
	}
	if r := holderRange(holder); r != "" && r != cfg.Range.String() {
		return nil, fmt.Errorf("network range %s shares its interface names (%s*) with the range %s of another cove server on this host (%s): give this one another --network-range",
			cfg.Range, tag, r, holder)
	}
	return nil, fmt.Errorf("network range %s is in use by another cove server on this host (%s): its sandboxes' networks and firewall would be this one's; "+
		"stop it, or give this one another --network-range", cfg.Range, holder)
}

// sweeping is what a lock file holds while a node's start sweeps it.
const sweeping = "sweeping"

// sweepLocks removes the lock files of nodes that died without releasing
// them (killed): a file no process holds is taken, then released.
func sweepLocks() {
	files, _ := filepath.Glob(filepath.Join(lockDir, "*.lock"))
	for _, f := range files {
		if release, _, err := fsutil.TryLock(f, sweeping); err == nil {
			release()
		}
	}
}

// holderRange reads the range out of a lock file's description.
func holderRange(desc string) string {
	r, _, _ := strings.Cut(strings.TrimPrefix(desc, "range "), ",")
	if r == desc {
		return ""
	}
	return r
}
