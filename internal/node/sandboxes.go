package node

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/isolation"
)

// Sandboxes is what a node offers the control plane, declared once, each
// call bounded by its context (a remote node's calls also by their own
// timeout) and failing with an error of package errs: the
// Manager in process (`cove server`), a node's API client and the
// cluster of them (`cove api`) all are one, and the node API serves a
// Manager as one (nodeapi.Manager adds what only the API replicas ask).
type Sandboxes interface {
	Create(ctx context.Context, req CreateRequest) (Info, error)
	Kill(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (Info, error)
	List(ctx context.Context) ([]Info, error)
	SetTimeout(ctx context.Context, id string, timeout time.Duration) (Info, error)
	ExtendTimeout(ctx context.Context, id string, timeout time.Duration) (Info, error)
	Stats(ctx context.Context, id string) (isolation.Stats, error)
	AgentLog(ctx context.Context, id string) ([]byte, error)
	UpdateNetwork(ctx context.Context, id string, u NetworkUpdate) error
	Pause(ctx context.Context, id string) (Info, error)
	PauseFiles(ctx context.Context, id string) (Info, error)
	Resume(ctx context.Context, id string, timeout time.Duration) (Info, error)
	SaveLayer(ctx context.Context, id string, memory bool) (Copy, error)
}

var _ Sandboxes = (*Manager)(nil)
