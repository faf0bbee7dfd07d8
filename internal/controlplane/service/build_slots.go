package service

import (
	"github.com/covesandbox/cove/internal/template"
)

// MaxTeamBuilds caps a team's builds in progress at once: each holds a
// build sandbox (its memory promised on a node, its share of the node's
// CPU) and a goroutine and log here; a build past it is refused until one
// ends or is cancelled.
const MaxTeamBuilds = 4

// teamBuildsLocked counts a team's builds in progress: those whose record
// says they build (anywhere in a cluster), and those this process started
// that have not said so yet (t.mu is held).
func (t *Templates) teamBuildsLocked(team string) int {
	n := 0
	for _, r := range t.store.List(team) {
		if r.Team != team {
			continue
		}
		for _, b := range r.Builds {
			switch {
			case b.Status == template.StatusBuilding:
				n++
			case b.Status == template.StatusWaiting && t.running(b.ID):
				n++
			}
		}
	}
	return n
}

// running reports whether this process runs a build that has not ended
// (t.mu is held).
func (t *Templates) running(buildID string) bool {
	bl := t.logs[buildID]
	if bl == nil || bl.done == nil {
		return false
	}
	select {
	case <-bl.done:
		return false
	default:
		return true
	}
}
