package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

// Recover rebuilds the table after the node restarted: sandboxes still
// alive are adopted (with their timers), records of dead ones and whatever
// the driver holds without a record are removed. It returns how many were
// adopted and how many removed.
func (m *Manager) Recover(ctx context.Context) (adopted, removed int, err error) {
	// Copies of processes live only while a fork starts its children.
	if err := fsutil.RemoveTree(m.imagesDir()); err != nil {
		m.log.Error("remove copies of processes a stopped node left", "path", m.imagesDir(), logx.Err(err))
	}
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return 0, 0, err
	}
	known := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(m.cfg.Dir, name))
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		var info Info
		b, err := os.ReadFile(filepath.Join(m.cfg.Dir, name))
		if err == nil {
			err = json.Unmarshal(b, &info)
		}
		if err != nil || isolation.ValidateID(info.ID) != nil {
			m.log.Warn("drop unreadable sandbox record", "file", name, logx.Err(err))
			_ = os.Remove(filepath.Join(m.cfg.Dir, name))
			continue
		}
		known[info.ID] = true
		m.notePhase(info.ID, info.Phase())
		if m.adopt(ctx, info) {
			adopted++
			continue
		}
		if err := m.recordDriver(info).Destroy(ctx, info.ID); err != nil {
			m.log.Error("remove dead sandbox", logx.SandboxID(info.ID), logx.Err(err))
			continue
		}
		// Its memory on disk, whole or not, if it had any.
		if err := fsutil.RemoveTree(m.spillDir(info.ID)); err != nil {
			m.log.Error("remove a lost sandbox's memory on disk", logx.SandboxID(info.ID), logx.Err(err))
			continue
		}
		m.removeRecord(info.ID)
		removed++
	}
	for _, d := range m.driverList() {
		n, err := m.removeLeftovers(ctx, d, func(id string) bool { return known[id] })
		removed += n
		if err != nil {
			return adopted, removed, err
		}
	}
	m.log.Info("node recovered", "adopted", adopted, "removed", removed)
	return adopted, removed, nil
}

// adopt re-attaches a recorded sandbox if it is alive and not yet expired
// (or paused).
func (m *Manager) adopt(ctx context.Context, info Info) bool {
	switch {
	case info.State == StatePaused: // a paused sandbox's time stands still
	case info.State != StateRunning || !time.Now().Before(info.EndAt):
		return false
	}
	if info.Phase() == PhaseSpilling {
		var err error
		if info, err = m.adoptSpilling(ctx, info); err != nil {
			m.log.Error("sandbox lost", logx.SandboxID(info.ID), logx.Err(err))
			return false
		}
	}
	if p := info.Phase(); p == PhaseFiles || p == PhaseOnDisk {
		return m.adoptSaved(ctx, info)
	}
	if err := m.recordDriver(info).Recover(ctx, info.Handle); err != nil {
		m.log.Info("sandbox lost", logx.SandboxID(info.ID), logx.Err(err))
		return false
	}
	if info.Phase() == PhaseSaving {
		// The node stopped while it copied the sandbox's files: it was
		// frozen for that alone.
		if p, ok := m.recordDriver(info).(isolation.Pauser); ok {
			if err := p.Resume(ctx, info.ID); err != nil {
				m.log.Error("let a sandbox frozen for a copy run again", logx.SandboxID(info.ID), logx.Err(err))
			}
		}
		if err := m.recordAs(&info, StateRunning, Rest{}); err != nil {
			m.log.Error("record a recovered sandbox", logx.SandboxID(info.ID), logx.Err(err))
		}
		m.log.Info("sandbox thawed after an interrupted copy of its files", logx.SandboxID(info.ID))
	}
	sb := &sandbox{team: info.Team, limits: info.Limits, driver: m.recordDriver(info), info: info, ended: make(chan struct{}), agent: m.agentFor(info.ID)}
	if info.Network != nil && m.cfg.Networks != nil {
		// The sandbox's init holds its namespace: a handle lets the network be
		// reused once the sandbox ends.
		ns, _ := os.Open(fmt.Sprintf("/proc/%d/ns/net", info.Handle.PID))
		n, err := m.cfg.Networks.Adopt(info.Network.Slot, ns, info.Network.Internet)
		if err == nil {
			err = applyRules(ctx, m.cfg.Networks, n, info.Network, info.Team, info.ID)
		}
		if err != nil {
			m.log.Error("adopt sandbox network", logx.SandboxID(info.ID), logx.Err(err))
		}
		sb.net = n
	}
	if info.AccessToken != "" {
		sb.agent.SetToken(info.AccessToken)
	}
	sb.timer = time.AfterFunc(time.Until(info.EndAt), func() { m.expire(info.ID) })
	if info.State == StatePaused {
		sb.timer.Stop() // a paused sandbox's time starts again at its resume
		sb.mu.Lock()
		m.scheduleSpill(sb)
		sb.mu.Unlock()
	}
	m.mu.Lock()
	m.sandboxes[info.ID] = sb
	m.mu.Unlock()
	m.usage.observe(info, time.Now()) // it runs on from now, for this process
	m.watch(sb)
	return true
}

// adoptSaved takes back a sandbox paused without processes: without its
// memory (what a node that stopped while it ended them left is removed;
// its record and saved files stay until it is resumed or killed), or with
// its memory on disk (the driver's state of it stays for the restore).
func (m *Manager) adoptSaved(ctx context.Context, info Info) bool {
	if info.Phase() == PhaseFiles {
		if err := m.recordDriver(info).Destroy(ctx, info.ID); err != nil {
			m.log.Error("remove what is left of a sandbox paused without its memory", logx.SandboxID(info.ID), logx.Err(err))
		}
		// A memory image a pause without memory had yet to remove.
		if err := fsutil.RemoveTree(m.spillDir(info.ID)); err != nil {
			m.log.Error("remove the memory on disk of a sandbox paused without it", logx.SandboxID(info.ID), logx.Err(err))
		}
		info.Handle = isolation.Handle{}
	}
	sb := &sandbox{team: info.Team, limits: info.Limits, driver: m.recordDriver(info), info: info, ended: make(chan struct{}), agent: m.agentFor(info.ID)}
	sb.timer = time.AfterFunc(time.Hour, func() { m.expire(info.ID) })
	sb.timer.Stop() // its time starts again at its resume
	m.mu.Lock()
	m.sandboxes[info.ID] = sb
	m.mu.Unlock()
	return true
}
