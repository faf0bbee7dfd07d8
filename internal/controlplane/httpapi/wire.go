package httpapi

import (
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/network"
)

// clientID is E2B's constant filler field.
const clientID = "6532622b"

// sandboxJSON is the Sandbox schema (create, connect).
type sandboxJSON struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	Alias              string  `json:"alias,omitempty"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

func toSandbox(s service.Sandbox) sandboxJSON {
	out := sandboxJSON{
		TemplateID: s.TemplateID, SandboxID: s.ID, ClientID: clientID, EnvdVersion: s.EnvdVersion,
		Alias: s.Alias, EnvdAccessToken: s.EnvdAccessToken, Domain: &s.Domain,
	}
	if s.TrafficAccessToken != "" {
		out.TrafficAccessToken = &s.TrafficAccessToken
	}
	return out
}

// volumeMountJSON is a sandbox's volume: its name and where it is mounted.
type volumeMountJSON struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// lifecycle is SandboxDetail.lifecycle.
type lifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// sandboxDetail is the SandboxDetail and ListedSandbox schema.
type sandboxDetail struct {
	TemplateID          string            `json:"templateID"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	Alias               string            `json:"alias,omitempty"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	State               string            `json:"state"`
	EnvdVersion         string            `json:"envdVersion"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
	Domain              *string           `json:"domain,omitempty"`
	Metadata            map[string]string `json:"metadata"`
	Lifecycle           *lifecycle        `json:"lifecycle,omitempty"`
	VolumeMounts        []volumeMountJSON `json:"volumeMounts"`
	Network             *networkJSON      `json:"network,omitempty"`
	// Isolation is Cove's own field: the driver the sandbox runs on.
	// Clients that do not know it ignore it.
	Isolation string `json:"isolation,omitempty"`
	// Node, in a cluster, is the node the sandbox runs on (Cove's own).
	Node string `json:"node,omitempty"`
	// EnvdUnresponsiveAtPause: paused while its agent did not answer, it
	// resumes only with memory false (onResume: reboot).
	EnvdUnresponsiveAtPause bool `json:"envdUnresponsiveAtPause,omitempty"`
}

func toDetail(s service.Sandbox, withSecrets bool) sandboxDetail {
	d := sandboxDetail{
		TemplateID: s.TemplateID, SandboxID: s.ID, ClientID: clientID, Alias: s.Alias,
		StartedAt: s.StartedAt, EndAt: s.EndAt, CPUCount: s.CPUCount, MemoryMB: s.MemoryMB,
		DiskSizeMB: s.DiskMB, State: string(s.State), EnvdVersion: s.EnvdVersion, Metadata: s.Metadata,
		Isolation: s.Isolation, Node: s.Node, EnvdUnresponsiveAtPause: s.AgentUnresponsive,
	}
	if withSecrets {
		onTimeout := "kill"
		if s.AutoPause {
			onTimeout = "pause"
		}
		d.EnvdAccessToken, d.AllowInternetAccess, d.Domain = s.EnvdAccessToken, s.AllowInternetAccess, &s.Domain
		d.Lifecycle = &lifecycle{OnTimeout: onTimeout, AutoResume: s.AutoResume}
	}
	if withSecrets {
		d.Network = toNetworkJSON(s)
	}
	if d.Metadata == nil {
		d.Metadata = map[string]string{}
	}
	d.VolumeMounts = []volumeMountJSON{}
	for _, v := range s.VolumeMounts {
		d.VolumeMounts = append(d.VolumeMounts, volumeMountJSON{Name: v.Name, Path: v.Path})
	}
	return d
}

// networkJSON is a sandbox's SandboxNetworkConfig as its details show
// it: never the upstream proxy's password.
type networkJSON struct {
	AllowOut           []string         `json:"allowOut,omitempty"`
	DenyOut            []string         `json:"denyOut,omitempty"`
	Rules              network.Rules    `json:"rules,omitempty"`
	EgressProxy        *egressProxyJSON `json:"egressProxy,omitempty"`
	AllowPublicTraffic bool             `json:"allowPublicTraffic"`
	// DNSServers are its own resolvers (none: the node's).
	DNSServers []string `json:"dnsServers,omitempty"`
}

// egressProxyJSON is an upstream proxy as a sandbox's details show it:
// never its password nor its CA.
type egressProxyJSON struct {
	Address  string         `json:"address"`
	Username string         `json:"username,omitempty"`
	TLS      *egressTLSJSON `json:"tls,omitempty"`
}

// egressTLSJSON says an upstream proxy is reached over TLS.
type egressTLSJSON struct {
	Enabled    bool   `json:"enabled"`
	ServerName string `json:"serverName,omitempty"`
}

func toNetworkJSON(s service.Sandbox) *networkJSON {
	out := &networkJSON{AllowPublicTraffic: s.PublicTraffic}
	if n := s.Network; n != nil {
		for _, p := range n.AllowOut {
			out.AllowOut = append(out.AllowOut, p.String())
		}
		out.AllowOut = append(out.AllowOut, n.AllowDomains...)
		for _, p := range n.DenyOut {
			out.DenyOut = append(out.DenyOut, p.String())
		}
		out.Rules = n.Rules
		for _, a := range n.DNSServers {
			out.DNSServers = append(out.DNSServers, a.String())
		}
		if e := n.EgressProxy; e != nil {
			out.EgressProxy = &egressProxyJSON{Address: e.Address, Username: e.Username}
			if e.TLS != nil {
				out.EgressProxy.TLS = &egressTLSJSON{Enabled: true, ServerName: e.TLS.ServerName}
			}
		}
	}
	return out
}

// metricJSON is the SandboxMetric schema.
type metricJSON struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       uint64    `json:"memUsed"`
	MemTotal      uint64    `json:"memTotal"`
	MemCache      uint64    `json:"memCache"`
	DiskUsed      uint64    `json:"diskUsed"`
	DiskTotal     uint64    `json:"diskTotal"`
	// Cove's: what the sandbox holds open through the egress proxy.
	EgressConnections uint64 `json:"egressConnections"`
}

func toMetric(m service.Metric) metricJSON {
	return metricJSON{
		Timestamp: m.At, TimestampUnix: m.At.Unix(), CPUCount: m.CPUCount, CPUUsedPct: m.CPUUsedPct,
		MemUsed: m.MemUsed, MemTotal: m.MemTotal, MemCache: m.MemCache, DiskUsed: m.DiskUsed, DiskTotal: m.DiskTotal,
		EgressConnections: m.EgressConnections,
	}
}
