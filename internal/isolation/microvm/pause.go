package microvm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	st, err := parseStatus(raw)
	if err != nil {
		return false, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return st.Running, nil
}

// vmStatus is QEMU's answer to query-status.
type vmStatus struct {
	Running bool   `json:"running"`
	Status  string `json:"status"`
}

func parseStatus(raw []byte) (vmStatus, error) {
	var st struct {
		Return vmStatus `json:"return"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return vmStatus{}, fmt.Errorf("query-status: %w", err)
	}
	return st.Return, nil
}

// monitor runs a QMP command on sandbox id's QEMU and returns its answer.
func (d *Driver) monitor(ctx context.Context, id, command string) ([]byte, error) {
	if d.get(id) == nil {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	m, err := connectMonitor(ctx, d.dir(id))
	if err != nil {
		return nil, fmt.Errorf("sandbox %s's monitor: %w", id, err)
	}
	defer m.Disconnect()
	raw, err := runQMP(m, command, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	return raw, nil
}

// connectMonitor connects to the QMP socket of the VM in dir, for ctx's
// time (10 s without a deadline). QEMU serves one client at a time: an
// operation makes all its requests on one connection.
func connectMonitor(ctx context.Context, dir string) (*qmp.SocketMonitor, error) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	m, err := qmp.NewSocketMonitor("unix", filepath.Join(dir, qmpSocket), timeout)
	if err != nil {
		return nil, err
	}
	if err := m.Connect(); err != nil {
		return nil, err
	}
	return m, nil
}

// runQMP runs command with its arguments (nil: none) on m, passing file
// along when set (getfd), and returns the answer.
func runQMP(m *qmp.SocketMonitor, command string, args map[string]any, file *os.File) ([]byte, error) {
	c := qmp.Command{Execute: command}
	if args != nil { // a nil map would be a null, which QEMU refuses
		c.Args = args
	}
	cmd, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var raw []byte
	if file != nil {
		raw, err = m.RunWithFile(cmd, file)
	} else {
		raw, err = m.Run(cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	return raw, nil
}
