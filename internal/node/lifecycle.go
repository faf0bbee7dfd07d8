package node

import (
	"encoding/json"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// Phase is where a sandbox is in its lifecycle. Its record holds it, as
// State and, for a paused or saving sandbox, Rest; Info.Phase reads it.
// Every record the node writes goes through writeRecord, which refuses a
// change of phase that Transitions does not list.
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
	// may be shared for another node to boot it from (Rest.Files).
	PhasePaused Phase = "paused"
	// PhaseSpilling: paused, its memory being written to disk; a node
	// that restarts meanwhile finds out which way it went.
	PhaseSpilling Phase = "spilling"
	// PhaseOnDisk: paused, its memory on disk (Rest.Memory), holding none.
	PhaseOnDisk Phase = "paused on disk"
	// PhaseFiles: paused without its memory: its files saved as a layer
	// (Rest.Files), no processes; a resume boots it again.
	PhaseFiles Phase = "paused as files"
	// PhaseKilled: ended; its record goes.
	PhaseKilled Phase = "killed"
)

// Rest is what a paused or saving sandbox is made of beyond what every
// record holds: one value, whose Phase says which parts it has. A running
// sandbox's is zero.
//
//	PhaseSaving    none: it is frozen while its files are copied
//	PhasePaused    Files, when a copy of its files is shared for another
//	               node to boot it from if this one is lost
//	PhaseSpilling  Memory, without its manifest yet; Files as paused
//	PhaseOnDisk    Memory, with its manifest; Files as paused
//	PhaseFiles     Files: what it boots from again
type Rest struct {
	Phase  Phase         `json:"phase,omitempty"`
	Files  *SavedFiles   `json:"files,omitempty"`
	Memory *MemoryOnDisk `json:"memory,omitempty"`
}

// paused is the rest of a sandbox paused with its memory, keeping a shared
// copy of its files if it has one; spilling and onDisk, that of one whose
// memory is being written to dir, or is there with its manifest.
func (r Rest) paused() Rest { return Rest{Phase: PhasePaused, Files: r.Files} }

func (r Rest) spilling(dir string) Rest {
	return Rest{Phase: PhaseSpilling, Files: r.Files, Memory: &MemoryOnDisk{Dir: dir}}
}

func (r Rest) onDisk(dir string, files []template.FileSum) Rest {
	return Rest{Phase: PhaseOnDisk, Files: r.Files, Memory: &MemoryOnDisk{Dir: dir, Files: files}}
}

// check refuses a rest its record's state cannot have. A killed
// sandbox's record may keep the rest it had: its parts go with it.
func (r Rest) check(s State) error {
	ok := s == StateKilled
	switch r.Phase {
	case "":
		ok = ok || r.Files == nil && r.Memory == nil && s != StatePaused
	case PhaseSaving:
		ok = ok || r.Files == nil && r.Memory == nil && s == StateRunning
	case PhasePaused:
		ok = ok || r.Memory == nil && s == StatePaused
	case PhaseSpilling:
		ok = ok || r.Memory != nil && r.Memory.Files == nil && s == StatePaused
	case PhaseOnDisk:
		ok = ok || r.Memory != nil && r.Memory.Files != nil && s == StatePaused
	case PhaseFiles:
		ok = ok || r.Files != nil && r.Memory == nil && s == StatePaused
	}
	if !ok {
		return errs.New(errs.Internal, "a %s sandbox cannot rest as %q (files %t, memory %t)", s, r.Phase, r.Files != nil, r.Memory != nil)
	}
	return nil
}

// UnmarshalJSON reads a record, also one written before Rest, whose parts
// were loose fields of their own (a node's records on disk, a cluster's
// paused states in its database).
func (i *Info) UnmarshalJSON(b []byte) error {
	type record Info // without this method
	var r struct {
		record
		Saved    *SavedFiles   `json:"saved"`
		Fallback *SavedFiles   `json:"fallback"`
		Spilled  *MemoryOnDisk `json:"spilled"`
		Saving   bool          `json:"saving"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	*i = Info(r.record)
	if i.Rest.Phase != "" {
		return nil
	}
	switch {
	case r.Saving && i.State == StateRunning:
		i.Rest = Rest{Phase: PhaseSaving}
	case i.State != StatePaused:
	case r.Saved != nil:
		i.Rest = Rest{Phase: PhaseFiles, Files: r.Saved}
	case r.Spilled != nil && r.Spilled.Files == nil:
		i.Rest = Rest{Phase: PhaseSpilling, Files: r.Fallback, Memory: r.Spilled}
	case r.Spilled != nil:
		i.Rest = Rest{Phase: PhaseOnDisk, Files: r.Fallback, Memory: r.Spilled}
	default:
		i.Rest = Rest{Phase: PhasePaused, Files: r.Fallback}
	}
	return nil
}

// Phase is the sandbox's phase by its record.
func (i Info) Phase() Phase {
	switch i.State {
	case StateCreating:
		return PhaseCreating
	case StateRunning:
		if i.Rest.Phase == PhaseSaving {
			return PhaseSaving
		}
		return PhaseRunning
	case StatePaused:
		if i.Rest.Phase == "" {
			return PhasePaused
		}
		return i.Rest.Phase
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
	err = info.Rest.check(info.State)
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
