//go:build !linux

package volume

import (
	"errors"
	"os"
)

var errLinux = errors.New("volumes are loop-mounted ext4 images, which need Linux")

func loopMount(*os.File, string) error { return errLinux }

func unmount(string) error { return errLinux }
