package volume

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// loopMount attaches img to a free loop device and mounts its ext4 at
// target.
func loopMount(img *os.File, target string) error {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loop devices: %w", err)
	}
	defer unix.Close(ctl)
	for attempt := 0; ; attempt++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("a free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		loop, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(loop, &cfg)
		if errors.Is(err, unix.EBUSY) && attempt < 10 { // taken meanwhile
			unix.Close(loop)
			continue
		}
		if err != nil {
			unix.Close(loop)
			return fmt.Errorf("attach %s to %s: %w", img.Name(), dev, err)
		}
		err = unix.Mount(dev, target, "ext4", unix.MS_NOSUID|unix.MS_NODEV, "errors=remount-ro")
		unix.Close(loop) // the mount holds it now (or, on failure, nothing: it clears)
		if err != nil {
			return fmt.Errorf("mount %s: %w", img.Name(), err)
		}
		return nil
	}
}

// unmount detaches the mount at target.
func unmount(target string) error { return unix.Unmount(target, unix.MNT_DETACH) }
