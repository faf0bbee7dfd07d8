package node_test

import (
	"os"
	"testing"

	"github.com/covesandbox/cove/internal/isolation/namespaces/nstest"
)

// The namespaces driver runs this test binary as its spawner: nstest
// dispatches its roles first.
func TestMain(m *testing.M) { os.Exit(nstest.Run(m)) }
