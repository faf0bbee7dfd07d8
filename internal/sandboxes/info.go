package sandboxes

import (
	"net/netip"
	"path/filepath"
	"time"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/template"
)

// State is a sandbox's place in its lifecycle: creating → running ⇄
// paused → killed.
type State string

const (
	StateCreating State = "creating"
	StateRunning  State = "running"
	StatePaused   State = "paused"
	StateKilled   State = "killed"
)

// Info is what the node knows about a sandbox; it is also the record kept
// on disk so a restarted node can adopt the sandbox.
type Info struct {
	ID string `json:"id"`
	// Node names the node that runs it, where API replicas see a cluster
	// of them ("" in the node's own records).
	Node string `json:"node,omitempty"`
	// PausedState, where API replicas see a sandbox paused without its
	// memory whose files are shared, is its node's record of it as the
	// node API carries it: another node takes it over from that
	// (Manager.Receive).
	PausedState []byte `json:"-"`
	TemplateID  string `json:"templateID"`
	// BuildID is the template build it started from.
	BuildID string `json:"buildID,omitempty"`
	// Team owns the sandbox ("" for the node's own: builds); team quotas
	// count by it.
	Team string `json:"team,omitempty"`
	// Isolation names the driver that runs the sandbox ("namespaces",
	// "gvisor", "microvm").
	Isolation string            `json:"isolation,omitempty"`
	State     State             `json:"state"`
	Handle    isolation.Handle  `json:"handle"`
	Limits    isolation.Limits  `json:"limits"`
	StartedAt time.Time         `json:"startedAt"`
	EndAt     time.Time         `json:"endAt"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	EnvVars   map[string]string `json:"envVars,omitempty"`
	// Layers are the template layers the sandbox stacks: they stay until it
	// ends, even when its template is deleted.
	Layers []string `json:"layers,omitempty"`
	// Volumes are bound read-write into it at every start.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// AccessToken guards the agent ("" = open). Kept so a restarted node
	// can still talk to the agent.
	AccessToken string `json:"accessToken,omitempty"`
	// TrafficToken, when set, must come with traffic to the sandbox's ports
	// (all but the agent's).
	TrafficToken string `json:"trafficToken,omitempty"`
	// Settings are as its create asked (their fields are the record's
	// own in JSON).
	Settings
	Timeout time.Duration  `json:"timeout,omitempty"`
	Exit    isolation.Exit `json:"exit,omitzero"`
	// Rest, on a paused or saving sandbox, is what it is made of
	// meanwhile: its files saved, its memory on disk (lifecycle.go).
	Rest Rest `json:"rest,omitzero"`
	// OwnLayer is the layer its last pause without memory saved, the top
	// of Layers: the next such pause merges into it, so that a sandbox
	// stacks one saved layer however often it is paused. It belongs to
	// the layer stack, not to Rest: it stays while the sandbox runs again.
	OwnLayer string       `json:"ownLayer,omitempty"`
	Network  *NetworkInfo `json:"network,omitempty"`
}

// LayerNames are the names of stored layers' paths: a replica knows a
// sandbox's layers by name, its node by path.
func LayerNames(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}

// VolumeMount is a volume a sandbox mounts: its id and name, where, and
// the bind that does it (the node's, from the id).
type VolumeMount struct {
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name"`
	Path string         `json:"path"`
	Bind isolation.Bind `json:"bind"`
}

// SavedFiles is a sandbox paused without its memory.
type SavedFiles struct {
	// Layer is its files, checked against this manifest entry before it
	// boots again.
	Layer template.LayerSum `json:"layer"`
	// Template is what it boots from: its template's defaults and start
	// command, with the layers it stacked and Layer on top.
	Template template.Template `json:"template"`
	// Blobs, in a cluster with an object store, name the archive of each
	// layer it stacks (Template's and Layer): any node can then take the
	// sandbox over (Manager.Receive) when this one is lost.
	Blobs map[string]string `json:"blobs,omitempty"`
}

// NetworkInfo is a sandbox's network, when the node gives it one.
type NetworkInfo struct {
	Slot     int            `json:"slot"`
	Addr     string         `json:"addr"`
	Internet bool           `json:"internet"`
	AllowOut []netip.Prefix `json:"allowOut,omitempty"`
	DenyOut  []netip.Prefix `json:"denyOut,omitempty"`
	// AllowDomains pass the egress proxy (ports 80 and 443, by SNI or Host).
	AllowDomains []string `json:"allowDomains,omitempty"`
	// Rules transform requests to their domains (with the team's secrets).
	Rules network.Rules `json:"rules,omitempty"`
	// EgressProxy is the upstream proxy its TCP goes through (nil: none).
	EgressProxy *network.EgressProxy `json:"egressProxy,omitempty"`
	// Tokens are the workload tokens its rules may name (E2B's iam).
	Tokens map[string]svid.Token `json:"tokens,omitempty"`
	// DNSServers are its own resolvers (nil: the node's).
	DNSServers []netip.Addr `json:"dnsServers,omitempty"`
}

// KilledDetail is the exit detail of a sandbox ended by Kill.
const KilledDetail = "killed"

// DefaultLimits are E2B's base sandbox: 2 vCPU, 512 MB.
var DefaultLimits = isolation.Limits{CPUMillis: 2000, MemoryMB: 512, DiskMB: 1024, PIDs: 1024}

// BuildKey is the metadata that marks a build sandbox (its value: the
// template), the node's own: no user's, never in the API's records.
const BuildKey = "cove.build"

// ForBuild reports whether the sandbox is a template build's.
func (i Info) ForBuild() bool { return i.Metadata[BuildKey] != "" }
