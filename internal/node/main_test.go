package node_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/covesandbox/cove/internal/isolation/namespaces"
)

// The namespaces driver runs this test binary (/proc/self/exe) as its
// spawner of sandboxes' inits: its roles run first, on the main thread,
// as cove's main runs them.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	if run := namespaces.Role(); run != nil {
		os.Exit(run())
	}
	runtime.UnlockOSThread()
	os.Exit(m.Run())
}
