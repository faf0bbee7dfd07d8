package microvm

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/digitalocean/go-qemu/qmp"

	"github.com/covesandbox/cove/internal/errs"
)

// qmpSocket is QEMU's monitor (QMP) in a VM's directory.
const qmpSocket = "qmp.sock"

// Pause implements isolation.Pauser: QEMU stops the guest's processors
// (its memory stays as it is).
func (d *Driver) Pause(ctx context.Context, id string) error { return d.monitor(ctx, id, "stop") }

// Resume implements isolation.Pauser.
func (d *Driver) Resume(ctx context.Context, id string) error { return d.monitor(ctx, id, "cont") }

// monitor runs a QMP command on sandbox id's QEMU.
func (d *Driver) monitor(ctx context.Context, id, command string) error {
	if d.get(id) == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	m, err := qmp.NewSocketMonitor("unix", filepath.Join(d.dir(id), qmpSocket), timeout)
	if err != nil {
		return fmt.Errorf("sandbox %s's monitor: %w", id, err)
	}
	if err := m.Connect(); err != nil {
		return fmt.Errorf("sandbox %s's monitor: %w", id, err)
	}
	defer m.Disconnect()
	cmd, _ := json.Marshal(qmp.Command{Execute: command})
	if _, err := m.Run(cmd); err != nil {
		return fmt.Errorf("sandbox %s: %s: %w", id, command, err)
	}
	return nil
}
