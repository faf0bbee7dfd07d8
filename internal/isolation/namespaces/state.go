package namespaces

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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

// procStartTime returns a live process's start time (clock ticks after
// boot), which together with the pid names one process for good. A zombie
// is not live.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// sameProcess reports whether pid is still the process that started at start.
func sameProcess(pid int, start uint64) bool {
	got, err := procStartTime(pid)
	return err == nil && got == start
}
