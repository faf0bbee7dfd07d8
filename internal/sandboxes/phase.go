package sandboxes

import (
	"encoding/json"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/template"
)

// Phase is where a sandbox is in its lifecycle. Its record holds it, as
// State and, for a paused or saving sandbox, Rest; Info.Phase reads it.
// The node changes a sandbox's phase only along its table of transitions
// (node.Transitions).
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
	// Unresponsive: its agent did not answer when it was paused with its
	// memory, which would bring that agent back: it resumes only booted
	// afresh over its files (E2B's envdUnresponsiveAtPause).
	Unresponsive bool `json:"unresponsive,omitempty"`
	// Resized: its CPUs changed while it was paused with its memory
	// (Node.Resize); its agent is told them at its resume.
	Resized bool `json:"resized,omitempty"`
}

// Paused is the rest of a sandbox paused with its memory, keeping a shared
// copy of its files if it has one; Spilling and OnDisk, that of one whose
// memory is being written to dir, or is there with its manifest.
// Each keeps whether its agent answered at the pause and whether it was
// resized since.
func (r Rest) Paused() Rest {
	return Rest{Phase: PhasePaused, Files: r.Files, Unresponsive: r.Unresponsive, Resized: r.Resized}
}

func (r Rest) Spilling(dir string) Rest {
	return Rest{Phase: PhaseSpilling, Files: r.Files, Memory: &MemoryOnDisk{Dir: dir}, Unresponsive: r.Unresponsive, Resized: r.Resized}
}

func (r Rest) OnDisk(dir string, files []template.FileSum) Rest {
	return Rest{Phase: PhaseOnDisk, Files: r.Files, Memory: &MemoryOnDisk{Dir: dir, Files: files}, Unresponsive: r.Unresponsive, Resized: r.Resized}
}

// Check refuses a rest its record's state cannot have. A killed
// sandbox's record may keep the rest it had: its parts go with it.
func (r Rest) Check(s State) error {
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

// MemoryOnDisk is a paused sandbox whose memory the node wrote to disk
// (Config.SpillAfter): the driver's checkpoint image and its manifest.
type MemoryOnDisk struct {
	Dir   string             `json:"dir"`
	Files []template.FileSum `json:"files"`
}
