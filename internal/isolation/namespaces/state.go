package namespaces

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
)

// stateFile is the driver's record of a sandbox inside its directory, so a
// restarted node can find (and remove) what a sandbox left.
const stateFile = "state.json"

type state struct {
	Handle isolation.Handle `json:"handle"`
	Cgroup string           `json:"cgroup"`
	Limits isolation.Limits `json:"limits"`
}

func writeState(dir string, st state) error {
	return fsutil.WriteJSON(filepath.Join(dir, stateFile), st)
}

func readState(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}
