package server

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/node"
)

// prepareDrivers runs cfg.PrepareDrivers, a shell command, beside the
// serving node when drivers are missing (make run's builds runsc and
// installs QEMU and the guests' kernel). While it runs, a create asking for
// one of them is told it is being prepared, with the command's last line
// of progress; once it ends, the drivers that open now join the node and
// the others say why not, the command's failure included.
//
// The command learns which drivers are missing from COVE_PREPARE_MISSING
// (space-separated names). Its stdout is progress, a line per step, which
// the server logs; its stderr is the detail, kept in <data-dir>/prepare.log.
// It runs in a process group of its own, which stop (or ctx) ends; stop
// returns once the command ended and its drivers were opened.
func prepareDrivers(ctx context.Context, cfg Config, set *driverSet, mgr *node.Manager, log *slog.Logger) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	end := make(chan struct{})
	stop = func() { cancel(); <-end }
	var missing []string
	for name := range set.unavailable {
		missing = append(missing, name)
	}
	slices.Sort(missing)
	if cfg.PrepareDrivers == "" || len(missing) == 0 {
		close(end)
		return stop, nil
	}
	logPath := filepath.Join(cfg.DataDir, "prepare.log")
	detail, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("prepare drivers: %w", err)
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cfg.PrepareDrivers)
	cmd.Env = append(os.Environ(), "COVE_PREPARE_MISSING="+strings.Join(missing, " "))
	cmd.Stderr = detail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	progress, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		detail.Close()
		return nil, fmt.Errorf("prepare drivers: %w", err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		detail.Close()
		return nil, fmt.Errorf("prepare drivers: %s: %w", cfg.PrepareDrivers, err)
	}
	log.Info("preparing drivers in the background", "drivers", missing, "command", cfg.PrepareDrivers, "detail", logPath)
	say := func(step string) {
		for _, name := range missing {
			mgr.SetUnavailable(name, step+"; the detail is in "+logPath, true)
		}
	}
	say("started")
	go func() {
		defer close(end)
		defer detail.Close()
		lines := bufio.NewScanner(progress)
		for lines.Scan() {
			step := strings.TrimSpace(lines.Text())
			if step == "" {
				continue
			}
			log.Info("preparing drivers", "step", step)
			say(step)
		}
		failed := cmd.Wait()
		if ctx.Err() != nil {
			return
		}
		if failed != nil {
			log.Error("preparing drivers failed", "command", cfg.PrepareDrivers, "detail", logPath, logx.Err(failed))
		}
		for _, name := range missing {
			d, err := set.open(name)
			if err == nil {
				err = mgr.AddDriver(ctx, d)
			}
			if err != nil {
				why := err.Error()
				if failed != nil {
					why += fmt.Sprintf(" (preparing it failed: %v; the detail is in %s)", failed, logPath)
				}
				mgr.SetUnavailable(name, why, false)
				log.Warn(name+" isolation unavailable", "why", why)
				continue
			}
			log.Info(name + " isolation ready")
		}
	}()
	return stop, nil
}
