package microvm

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/digitalocean/go-qemu/qmp"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
)

// qmpSocket is QEMU's monitor (QMP) in a VM's directory.
const qmpSocket = "qmp.sock"

// Pause implements isolation.Pauser: QEMU stops the guest's processors
// (its memory stays as it is).
func (d *Driver) Pause(ctx context.Context, id string) error {
	_, err := d.monitor(ctx, id, "stop")
	return err
}

// Resume implements isolation.Pauser. The guest's clock stood still
// while it was stopped: the init sets it again.
func (d *Driver) Resume(ctx context.Context, id string) error {
	if _, err := d.monitor(ctx, id, "cont"); err != nil {
		return err
	}
	if err := d.get(id).vm.SetClock(ctx); err != nil {
		// It runs, its clock behind: no reason to keep it stopped.
		d.cfg.Log.Error("set a resumed guest's clock", logx.SandboxID(id), logx.Err(err))
	}
	return nil
}

// running asks sandbox id's QEMU whether the guest runs (not stopped).
func (d *Driver) running(ctx context.Context, id string) (bool, error) {
	raw, err := d.monitor(ctx, id, "query-status")
	if err != nil {
		return false, err
	}
	var status struct {
		Return struct {
			Running bool `json:"running"`
		} `json:"return"`
	}
	if err := json.Unmarshal(raw, &status); err != nil {
		return false, fmt.Errorf("sandbox %s: query-status: %w", id, err)
	}
	return status.Return.Running, nil
}

// monitor runs a QMP command on sandbox id's QEMU and returns its answer.
func (d *Driver) monitor(ctx context.Context, id, command string) ([]byte, error) {
	if d.get(id) == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	m, err := qmp.NewSocketMonitor("unix", filepath.Join(d.dir(id), qmpSocket), timeout)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s's monitor: %w", id, err)
	}
	if err := m.Connect(); err != nil {
		return nil, fmt.Errorf("sandbox %s's monitor: %w", id, err)
	}
	defer m.Disconnect()
	cmd, _ := json.Marshal(qmp.Command{Execute: command})
	raw, err := m.Run(cmd)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %s: %w", id, command, err)
	}
	return raw, nil
}
