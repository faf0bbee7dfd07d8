package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/covesandbox/cove/internal/fsutil"
)

// lockDataDir takes the data directory for this server (an exclusive flock
// on its lock file, released when the process ends): two servers on one
// directory fight over its sandboxes, networks and layers. The file holds
// the holder's pid, for the message the second one gets. A lock still held
// is tried again for a few seconds: a server killed a moment ago may have
// left a child between fork and exec, which holds it until it execs.
func lockDataDir(dir string) (unlock func(), err error) {
	var holder string
	for deadline := time.Now().Add(lockPatience); ; time.Sleep(100 * time.Millisecond) {
		unlock, holder, err = fsutil.TryLock(filepath.Join(dir, "lock"), strconv.Itoa(os.Getpid()))
		if !errors.Is(err, fsutil.ErrLocked) || time.Now().After(deadline) {
			break
		}
	}
	if errors.Is(err, fsutil.ErrLocked) {
		if holder == "" {
			holder = "unknown"
		}
		return nil, fmt.Errorf("the data directory %s is in use by another cove server (pid %s): stop it, or give this one another --data-dir", dir, holder)
	}
	return unlock, err
}

// lockPatience is how long a start waits for a data directory's lock.
const lockPatience = 3 * time.Second
