// Package sandboxes is the node contract: what a node does with
// sandboxes, as the control plane sees it. It holds types and one
// interface, Node, and no implementation and nothing of Linux: the node's
// Manager (internal/node), the node API's client (internal/nodeapi), the
// cluster of them (internal/controlplane/cluster) and a fake
// (internal/nodefake) implement Node, and the control plane imports this
// package, never the node's (TestControlPlaneImportsTheContract).
package sandboxes

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/isolation"
)

// Node is what a node offers the control plane, each call bounded by its
// context (a remote node's calls also by their own timeout) and failing
// with an error of package errs. The node API serves a Manager as one
// (nodeapi.Manager adds what only the API replicas ask).
type Node interface {
	Create(ctx context.Context, req CreateRequest) (Info, error)
	Kill(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (Info, error)
	List(ctx context.Context) ([]Info, error)
	SetTimeout(ctx context.Context, id string, timeout time.Duration) (Info, error)
	ExtendTimeout(ctx context.Context, id string, timeout time.Duration) (Info, error)
	Stats(ctx context.Context, id string) (isolation.Stats, error)
	AgentLog(ctx context.Context, id string) ([]byte, error)
	UpdateNetwork(ctx context.Context, id string, u NetworkUpdate) error
	// Pause with strict refuses (Unavailable) a sandbox whose agent does
	// not answer; without, it pauses it marked (Rest.Unresponsive).
	Pause(ctx context.Context, id string, strict bool) (Info, error)
	PauseFiles(ctx context.Context, id string) (Info, error)
	Resume(ctx context.Context, id string, timeout time.Duration) (Info, error)
	// Resize gives a paused sandbox the CPUs and memory of l (a zero one
	// keeps its own) it resumes with, within its template's bounds, the
	// node's capacity and the team's quota (quota, else the node's; in
	// process only, as CreateRequest's); a running one is a Conflict.
	Resize(ctx context.Context, id string, l isolation.Limits, quota *TeamQuota) (Info, error)
	SaveLayer(ctx context.Context, id string, memory bool) (Copy, error)
}
