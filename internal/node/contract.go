package node

import "github.com/covesandbox/cove/internal/sandboxes"

// The node contract's types (package sandboxes) under the names the
// node's own code gives them: the Manager implements the contract, and its
// records are the contract's Info.
type (
	Info          = sandboxes.Info
	State         = sandboxes.State
	Phase         = sandboxes.Phase
	Rest          = sandboxes.Rest
	SavedFiles    = sandboxes.SavedFiles
	MemoryOnDisk  = sandboxes.MemoryOnDisk
	NetworkInfo   = sandboxes.NetworkInfo
	VolumeMount   = sandboxes.VolumeMount
	CreateRequest = sandboxes.CreateRequest
	TeamQuota     = sandboxes.TeamQuota
	Copy          = sandboxes.Copy
	NetworkUpdate = sandboxes.NetworkUpdate
	Usage         = sandboxes.Usage
)

const (
	StateCreating = sandboxes.StateCreating
	StateRunning  = sandboxes.StateRunning
	StatePaused   = sandboxes.StatePaused
	StateKilled   = sandboxes.StateKilled

	PhaseNone     = sandboxes.PhaseNone
	PhaseCreating = sandboxes.PhaseCreating
	PhaseRunning  = sandboxes.PhaseRunning
	PhaseSaving   = sandboxes.PhaseSaving
	PhasePaused   = sandboxes.PhasePaused
	PhaseSpilling = sandboxes.PhaseSpilling
	PhaseOnDisk   = sandboxes.PhaseOnDisk
	PhaseFiles    = sandboxes.PhaseFiles
	PhaseKilled   = sandboxes.PhaseKilled

	KilledDetail = sandboxes.KilledDetail
	BuildKey     = sandboxes.BuildKey
)

var _ sandboxes.Node = (*Manager)(nil)
