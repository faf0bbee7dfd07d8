// Package guest is Cove's init inside a microVM (the sandbox binary runs
// it as the initramfs's /init): it mounts what a kernel's user space
// needs, loads the modules the initramfs brings, reports the guest on the
// console and, for now, powers the machine off. Starting the agent over
// the template's root file system comes with the driver.
package guest

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Is reports whether this process is a microVM's init.
func Is() bool { return os.Getpid() == 1 && os.Args[0] == "/init" }

// Ready is what the init prints on the console once the guest is up.
const Ready = "cove-guest: up"

// Main runs the init; it does not return unless powering off fails.
func Main() int {
	err := start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cove-guest: %v\n", err)
	}
	unix.Sync()
	// The machine stops; QEMU exits with it.
	if perr := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); perr != nil {
		fmt.Fprintf(os.Stderr, "cove-guest: power off: %v\n", perr)
	}
	return 1
}

func start() error {
	for _, m := range []struct{ fs, dir string }{{"devtmpfs", "/dev"}, {"proc", "/proc"}, {"sysfs", "/sys"}} {
		if err := unix.Mount(m.fs, m.dir, m.fs, unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dir, err)
		}
	}
	// The kernel found no /dev/console in the initramfs to give init:
	// its standard streams are the console from now on.
	console, err := os.OpenFile("/dev/console", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	for fd := range 3 {
		if err := unix.Dup2(int(console.Fd()), fd); err != nil {
			return err
		}
	}
	n, err := loadModules("/cove/modules")
	if err != nil {
		return err
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return err
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return err
	}
	fmt.Printf("%s release=%s boot_id=%s modules=%d\n", Ready, unix.ByteSliceToString(uts.Release[:]), strings.TrimSpace(string(boot)), n)
	return nil
}

// loadModules loads the modules the list names, in its order.
func loadModules(list string) (int, error) {
	f, err := os.Open(list)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" {
			continue
		}
		m, err := os.Open(p)
		if err != nil {
			return n, err
		}
		err = unix.FinitModule(int(m.Fd()), "", 0)
		m.Close()
		if err != nil && err != unix.EEXIST {
			return n, fmt.Errorf("load %s: %w", p, err)
		}
		n++
	}
	return n, sc.Err()
}
