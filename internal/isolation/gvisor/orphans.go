package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/logx"
)

// A node killed during a `runsc checkpoint` leaves the command running:
// it goes on writing the image and then ends the sandbox. Until it ends,
// the sandbox looks alive, and a restarted node that adopted it as such
// (or removed its half-written image) would lose it when the command
// ends it. Recover therefore waits for such a command first; the
// sandbox is then either alive and not being saved, or ended with its
// image whole.

// orphanedCheckpoints returns the pids of the `runsc checkpoint` commands
// of sandbox id that a stopped node left running. They are found once,
// at the first call: only a stopped node leaves them.
func (d *Driver) orphanedCheckpoints(id string) []int {
	d.orphansOnce.Do(func() { d.orphans = findCheckpoints(filepath.Join(d.cfg.Dir, runscState)) })
	return d.orphans[id]
}

// findCheckpoints lists, by sandbox, the processes running runsc's
// checkpoint command on the sandboxes under root (its --root).
func findCheckpoints(root string) map[string][]int {
	out := map[string][]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		at := slices.Index(args, "--root")
		if at < 0 || at+1 >= len(args) || args[at+1] != root || !slices.Contains(args, "checkpoint") {
			continue
		}
		id := args[len(args)-1] // runsc names the sandbox last
		out[id] = append(out[id], pid)
	}
	return out
}

// waitOrphans waits until the runsc commands a stopped node left running
// on sandbox id have ended, or ctx ends.
func (d *Driver) waitOrphans(ctx context.Context, id string) error {
	for _, pid := range d.orphanedCheckpoints(id) {
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // ended already
		}
		d.log.Info("waiting for a checkpoint a stopped node left running", logx.SandboxID(id), logx.PID(pid))
		start := time.Now()
		err = hostproc.WaitPidfdContext(ctx, pidfd)
		unix.Close(pidfd)
		if err != nil {
			return err
		}
		d.log.Info("the checkpoint a stopped node left running ended", logx.SandboxID(id), "waited", time.Since(start))
	}
	return nil
}
