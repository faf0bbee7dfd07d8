package server

import "time"

// SetNodeSweep changes how often a node sweeps what no record names and
// how old it must be, until the returned function undoes it.
func SetNodeSweep(every, age time.Duration) (undo func()) {
	oldEvery, oldAge := sweepEvery, orphanAge
	sweepEvery, orphanAge = every, age
	return func() { sweepEvery, orphanAge = oldEvery, oldAge }
}
