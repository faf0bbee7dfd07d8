package node

import (
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/network"
)

// sandbox is a live entry of the table.
type sandbox struct {
	// team never changes, nor does driver, the driver its record names,
	// which calls take without the sandbox's lock. limits change only by
	// a resize, under both the table's lock and the sandbox's:
	// admission reads them under the table's lock alone.
	team   string
	limits isolation.Limits
	driver isolation.Driver

	mu    sync.Mutex
	info  Info
	timer *time.Timer
	spill *time.Timer // a paused sandbox's move to disk (nil: none)
	agent *agentclient.Client
	net   *network.Net  // nil without node networking
	ended chan struct{} // closed once the sandbox is killed and cleaned up
}

func (s *sandbox) snapshot() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}
