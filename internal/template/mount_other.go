//go:build !linux

package template

import (
	"errors"
	"syscall"
)

var errLinux = errors.New("template builds mount tmpfs, which needs Linux")

func mountTmpfs(string, bool, string) error { return errLinux }

func unmount(string) error { return nil }

func ownMounts() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
