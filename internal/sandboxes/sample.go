package sandboxes

import "github.com/covesandbox/cove/internal/isolation"

// Sample is a running sandbox and its use at one moment: what a cluster's
// node reports of all its sandboxes in one call, for the API replicas'
// metric history.
type Sample struct {
	Info  Info
	Stats isolation.Stats
}
