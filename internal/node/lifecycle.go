package node

import (
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

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
	err = info.Rest.Check(info.State)
	if to := info.Phase(); err == nil && !legal(from, to) {
		err = errs.New(errs.Internal, "sandbox %s cannot go from %s to %s", info.ID, from, to)
	}
	if err != nil {
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

// transition takes sb (its lock held) to state and rest, with edit's other
// changes to its record (nil: none), and records it: writeRecord checks
// the move against Transitions, writes it and announces it. sb changes only
// once the record is written. When the record fails, undo (nil: nothing
// to undo) takes back what the caller did first (a driver's pause), sb
// stays as it was, and the error is returned. No other code changes a
// recorded sandbox's phase: transitioned, for a change already made,
// recordAs, for a record outside the table, and killing, for the end, are
// its other doors (TestOnePhaseWriter).
func (m *Manager) transition(sb *sandbox, state State, rest Rest, edit func(*Info), undo func()) error {
	next := sb.info
	if edit != nil {
		edit(&next)
	}
	next.State, next.Rest = state, rest
	if err := m.writeRecord(next); err != nil {
		if undo != nil {
			undo()
		}
		return err
	}
	sb.info = next
	return nil
}

// transitioned is transition for a change already made that cannot be
// taken back (a resume, a thaw): sb follows it whatever the record does;
// an unrecorded change (the error) leaves a restarted node the phase
// recorded before, which it knows how to leave.
func (m *Manager) transitioned(sb *sandbox, state State, rest Rest, edit func(*Info)) error {
	if edit != nil {
		edit(&sb.info)
	}
	sb.info.State, sb.info.Rest = state, rest
	return m.writeRecord(sb.info)
}

// recordAs is transition for a record outside the table: one being
// admitted or booted again (before its sandbox takes it), adopted at a
// restart or taken over from another node. info takes state and rest and
// is written through writeRecord.
func (m *Manager) recordAs(info *Info, state State, rest Rest) error {
	info.State, info.Rest = state, rest
	return m.writeRecord(*info)
}

// killing marks sb (its lock held) killed with exit, in the table alone:
// its record keeps its last phase until the teardown removes it, so that a
// node that stops meanwhile tears it down again at its restart.
func (m *Manager) killing(sb *sandbox, exit isolation.Exit) {
	sb.info.State, sb.info.Exit = StateKilled, exit
}
