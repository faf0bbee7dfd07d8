package namespaces

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// startClocks makes the sandbox's time namespace — its processes', which
// the init made for its children (sandboxInit) — count CLOCK_MONOTONIC and
// CLOCK_BOOTTIME from now, as a machine just booted does: /proc/uptime,
// uptime and top then tell the time since the create, or since the
// hand-over of a warm sandbox. The kernel takes offsets only while no
// process has entered the namespace: a sandbox whose processes started
// already (a warm one that ran its template's start command) keeps the
// clocks it has, and that is no error; nor is an init without a time
// namespace of its own (a kernel without them), whose uptime lxcfs tells.
func (d *Driver) startClocks(id string, pid int) error {
	proc := "/proc/" + strconv.Itoa(pid)
	own, err := os.Readlink(proc + "/ns/time_for_children")
	if err != nil {
		return fmt.Errorf("time namespace of sandbox %s: %w", id, err)
	}
	if own == d.hostTime {
		return nil
	}
	var mono, boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return err
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return err
	}
	// Whole seconds back: the clocks start between 0 and 1 s, never below
	// 0, which the kernel refuses.
	offsets := fmt.Sprintf("monotonic %d 0\nboottime %d 0\n", -mono.Sec, -boot.Sec)
	f, err := os.OpenFile(proc+"/timens_offsets", os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("clocks of sandbox %s: %w", id, err)
	}
	defer f.Close()
	if _, err := f.WriteString(offsets); err != nil && !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("clocks of sandbox %s: %w", id, err)
	}
	return nil
}
