package sandboxes

import (
	"net/netip"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/template"
)

// CreateRequest describes a new sandbox.
type CreateRequest struct {
	ID       string // "" = generate (or take a warm sandbox's)
	Template string // "" = base
	// Resolved, when set, is the template itself (template builds), and
	// Template is not looked up.
	Resolved *template.Template
	Timeout  time.Duration
	Limits   isolation.Limits // zero fields take the template's or the node's defaults
	// Sized: Limits' CPUs and memory are a size a user asked for, which
	// the template's maxCpuCount and maxMemoryMB bound (checkSize).
	Sized       bool
	EnvVars     map[string]string
	Metadata    map[string]string
	AccessToken string // "" = the agent accepts every caller
	// TrafficToken, when set, guards the sandbox's ports through the proxy.
	TrafficToken string
	// DeriveTokens has the node derive both tokens from the sandbox's id
	// once it is known (a warm sandbox has its id already) with its secret
	// (Config.Secret), replacing the two: the agent's when Secure, the
	// ports' unless PublicTraffic.
	DeriveTokens          bool
	Secure, PublicTraffic bool
	// NoInternet turns the sandbox's egress off (it has some by default).
	NoInternet bool
	// AllowOut and DenyOut are the sandbox's own egress rules (allow wins);
	// AllowDomains are names reachable on ports 80 and 443.
	AllowOut, DenyOut []netip.Prefix
	AllowDomains      []string
	// Rules transform requests to their domains (network.Rules), with the
	// team's secrets.
	Rules network.Rules
	// EgressProxy, when set, is the upstream SOCKS5 proxy its outbound
	// TCP goes through.
	EgressProxy *network.EgressProxy
	// Tokens are the workload tokens its rules may name (svid).
	Tokens map[string]svid.Token
	// DNSServers are the resolvers its /etc/resolv.conf names (nil: the
	// node's); its egress rules apply to them as to any address.
	DNSServers []netip.Addr
	// Isolation names the driver ("" = the node's default).
	Isolation string
	// Team owns the sandbox: its quota applies ("" = none).
	Team string
	// Quota, when set, is the team's quota here instead of the node's
	// (the team's own, from the control plane's records; in-process only:
	// a cluster's nodes keep their own and the API admits over all of them).
	Quota *TeamQuota
	// Settings are what the sandbox's record keeps as asked.
	Settings
	// BuildID, when set, is the build of Template to start from (a fork
	// starts from its parent's) instead of the one its tag names.
	BuildID string
	// Saved, when set, is a saved layer (SaveLayer) stacked on the
	// template's (or on Layers), checked against its manifest first.
	Saved *template.LayerSum
	// Layers, when set, replace the template build's layers (paths): a
	// fork stacks what its parent stacked.
	Layers []string
	// Volumes are bound read-write into the sandbox.
	Volumes []VolumeMount
	// Image, when set, is a copy of the processes of the sandbox Saved
	// and Layers come from (SaveLayer with memory): the sandbox runs them
	// on from where they were instead of booting (its template's start
	// command does not run again). A snapshot's template brings its own.
	Image *template.ProcessImage
	// Node, in a cluster, is the node the sandbox must go to (its API
	// replica's placement; a node ignores it).
	Node string
}

// Settings are what a create asks of a sandbox that its record (Info)
// keeps as asked, the node API carries as one message, and a fork's
// children inherit: a new such setting is a field here, on the node
// API's Settings, and where it is used (TestSettingsCross).
type Settings struct {
	// MaskRequestHost, when set, is the Host header the proxy gives
	// traffic to the sandbox's ports ("${PORT}" becomes the port).
	MaskRequestHost string `json:"maskRequestHost,omitempty"`
	// HTTPSPorts are its ports that serve HTTPS: the proxy speaks TLS to
	// them (E2B's network.httpsPorts).
	HTTPSPorts []int `json:"httpsPorts,omitempty"`
	// AutoPause pauses it at its timeout instead of killing it, with its
	// memory or, with AutoPauseFiles, its files only (PauseFiles);
	// AutoResume resumes it (for Timeout) on the first traffic to a port.
	AutoPause      bool `json:"autoPause,omitempty"`
	AutoResume     bool `json:"autoResume,omitempty"`
	AutoPauseFiles bool `json:"autoPauseFiles,omitempty"`
}

// TeamQuota caps one team's sandboxes; a zero field is no cap.
type TeamQuota struct {
	Sandboxes int
	CPUs      int
	MemoryMB  int64
	DiskMB    int64
	// StorageMB caps the layers its templates hold (the template service
	// enforces it, at a build's start).
	StorageMB int64
}

// Admit refuses (QuotaExceeded) what a team would add to what it uses
// when that passes the quota; a zero field of q is no cap. The same
// request may pass once some of the team's sandboxes end: the refusal
// says to retry.
func (q TeamQuota) Admit(use, add TeamQuota) error {
	var err error
	switch {
	case q.Sandboxes > 0 && use.Sandboxes+add.Sandboxes > q.Sandboxes:
		err = errs.New(errs.QuotaExceeded, "team quota: %d sandboxes running, at most %d", use.Sandboxes, q.Sandboxes)
	case q.CPUs > 0 && use.CPUs+add.CPUs > q.CPUs:
		err = errs.New(errs.QuotaExceeded, "team quota: %d CPUs in use, %d more would pass %d", use.CPUs, add.CPUs, q.CPUs)
	case q.MemoryMB > 0 && use.MemoryMB+add.MemoryMB > q.MemoryMB:
		err = errs.New(errs.QuotaExceeded, "team quota: %d MiB of memory in use, %d MiB more would pass %d MiB", use.MemoryMB, add.MemoryMB, q.MemoryMB)
	case q.DiskMB > 0 && use.DiskMB+add.DiskMB > q.DiskMB:
		err = errs.New(errs.QuotaExceeded, "team quota: %d MiB of disk in use, %d MiB more would pass %d MiB", use.DiskMB, add.DiskMB, q.DiskMB)
	}
	if err != nil {
		return errs.Retryable(err, time.Second, "")
	}
	return nil
}
