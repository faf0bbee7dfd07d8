package node

import (
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
)

// Phase is where a sandbox is in its lifecycle. Its record holds it, as
// State and the parts a paused or saving sandbox is made of (Saving,
// Spilled, Saved); Info.Phase reads it from them. Every record the node
// writes goes through writeRecord, which refuses a change of phase that
// Transitions does not list.
type Phase string

const (
	// PhaseNone: no record (yet, or any more).
	PhaseNone Phase = "none"
	// PhaseCreating: being started; never recorded (a node that stops
	// meanwhile finds the driver's leftovers and removes them).
	PhaseCreating Phase = "creating"
	// PhaseRunning: its processes run and its timeout runs.
	PhaseRunning Phase = "running"
	// PhaseSaving: running, but frozen while the node copies its files
	// (a snapshot, a fork, a pause without memory); a node that restarts
	// meanwhile lets it run again.
	PhaseSaving Phase = "saving"
	// PhasePaused: frozen in place with its memory; a copy of its files
	// may be shared for another node to boot it from (Fallback).
	PhasePaused Phase = "paused"
	// PhaseSpilling: paused, its memory being written to disk; a node
	// that restarts meanwhile finds out which way it went.
	PhaseSpilling Phase = "spilling"
	// PhaseOnDisk: paused, its memory on disk (Spilled), holding none.
	PhaseOnDisk Phase = "paused on disk"
	// PhaseFiles: paused without its memory: its files saved as a layer
	// (Saved), no processes; a resume boots it again.
	PhaseFiles Phase = "paused as files"
	// PhaseKilled: ended; its record goes.
	PhaseKilled Phase = "killed"
)

// Phase is the sandbox's phase by its record.
func (i Info) Phase() Phase {
	switch i.State {
	case StateCreating:
		return PhaseCreating
	case StateRunning:
		if i.Saving {
			return PhaseSaving
		}
		return PhaseRunning
	case StatePaused:
		switch {
		case i.Saved != nil:
			return PhaseFiles
		case i.Spilled != nil && i.Spilled.Files == nil:
			return PhaseSpilling
		case i.Spilled != nil:
			return PhaseOnDisk
		}
		return PhasePaused
	case StateKilled:
		return PhaseKilled
	}
	return PhaseNone
}

// Transition is a legal change of phase and what makes it.
type Transition struct {
	From, To Phase
	By       string
}

// Transitions are the lifecycle's legal changes of phase. A record
// rewritten in the same phase (a new timeout, network rules, a shared
// copy of its files) is always legal. docs/ARCHITECTURE.md draws this
// table (TestArchitectureDrawsTheLifecycle).
var Transitions = []Transition{
	{PhaseNone, PhaseCreating, "Create, from a template, a snapshot or a fork, or from the warm pool"},
	{PhaseCreating, PhaseRunning, "its agent answers (admit)"},
	{PhaseNone, PhaseFiles, "Receive: taken over from a lost node"},
	{PhaseRunning, PhaseSaving, "SaveLayer of a running sandbox (snapshot, fork, pause without memory)"},
	{PhaseSaving, PhaseRunning, "the copy is done or failed (thaw); a restarted node"},
	{PhaseSaving, PhaseFiles, "PauseFiles, once its files are copied"},
	{PhaseRunning, PhasePaused, "Pause; the timeout with auto-pause"},
	{PhaseRunning, PhaseFiles, "PauseFiles; the timeout with auto-pause of files"},
	{PhasePaused, PhaseRunning, "Resume; Wake (auto-resume) on traffic"},
	{PhasePaused, PhaseSpilling, "Spill, SpillAfter after the pause"},
	{PhasePaused, PhaseFiles, "PauseFiles"},
	{PhaseSpilling, PhasePaused, "the checkpoint failed; a restarted node finds the sandbox alive"},
	{PhaseSpilling, PhaseOnDisk, "the checkpoint's image is written and listed"},
	{PhaseOnDisk, PhaseRunning, "Resume: restored from the image"},
	{PhaseOnDisk, PhaseFiles, "PauseFiles: the image goes"},
	{PhaseFiles, PhaseCreating, "Resume: booted again over its saved files"},
	{PhaseRunning, PhaseKilled, "Kill; the timeout; its init exited"},
	{PhasePaused, PhaseKilled, "Kill"},
	{PhaseOnDisk, PhaseKilled, "Kill"},
	{PhaseFiles, PhaseKilled, "Kill"},
	{PhaseKilled, PhaseNone, "its record is removed"},
}

// legal reports whether a sandbox may go from one phase to another.
// Creating is never recorded: a record goes from the phase before it to
// the phase after it.
func legal(from, to Phase) bool {
	if from == to {
		return true
	}
	for _, t := range Transitions {
		if t.From == from && t.To == to {
			return true
		}
		if t.To == PhaseCreating && t.From == from && legal(PhaseCreating, to) {
			return true
		}
	}
	return false
}

// checkPhase refuses a record that moves its sandbox along no listed
// transition: a bug of the node's, reported as such.
func (m *Manager) checkPhase(info Info) (from Phase, err error) {
	m.recMu.Lock()
	from, ok := m.recorded[info.ID]
	m.recMu.Unlock()
	if !ok {
		from = PhaseNone
	}
	if to := info.Phase(); !legal(from, to) {
		err := errs.New(errs.Internal, "sandbox %s cannot go from %s to %s", info.ID, from, to)
		m.log.Error("illegal change of a sandbox's phase refused", logx.SandboxID(info.ID), logx.Err(err))
		return from, err
	}
	return from, nil
}

// notePhase remembers the phase of a record just written or read (none:
// removed).
func (m *Manager) notePhase(id string, p Phase) {
	m.recMu.Lock()
	defer m.recMu.Unlock()
	if p == PhaseNone {
		delete(m.recorded, id)
		return
	}
	m.recorded[id] = p
}
