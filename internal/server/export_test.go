package server

import "time"

// SetVolumeOrphanAge changes how old a volume no record names must be
// before its node removes it, until the returned function undoes it.
func SetVolumeOrphanAge(d time.Duration) (undo func()) {
	old := volumeOrphanAge
	volumeOrphanAge = d
	return func() { volumeOrphanAge = old }
}
