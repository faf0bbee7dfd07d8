// Package nstest is for the test binaries that start the namespaces
// driver: the driver runs the test binary (/proc/self/exe) as its spawner
// of sandboxes' inits, so such a binary dispatches the driver's roles
// first, as cove's main does. Importing it locks main to the main thread.
package nstest

import (
	"os"
	"runtime"
	"testing"

	"github.com/covesandbox/cove/internal/isolation/namespaces/nsinit"
)

// A sandbox's init changes namespaces on the thread it execs from: main
// (the test binary's) runs on the process's main thread.
func init() { runtime.LockOSThread() }

// Run runs this process's role of the driver's, when it was started as
// one, and exits with it; else it runs the tests and returns their code.
func Run(m *testing.M) int {
	if run := nsinit.Role(); run != nil {
		os.Exit(run())
	}
	runtime.UnlockOSThread()
	return m.Run()
}
