package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/svid"
)

// newSandbox is the body of POST /sandboxes (SDKFields says what Cove does
// with each field; unknown fields are ignored).
type newSandbox struct {
	TemplateID      string            `json:"templateID"`
	Timeout         *int64            `json:"timeout"`
	AutoPause       *bool             `json:"autoPause"`
	AutoPauseMemory *bool             `json:"autoPauseMemory"`
	VolumeMounts    []volumeMountJSON `json:"volumeMounts"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Network             *networkConfig    `json:"network"`
	IAM                 *struct {
		Tokens map[string]svid.Token `json:"tokens"`
	} `json:"iam"`
	MCP json.RawMessage `json:"mcp"`
	// CPUCount and MemoryMB size the sandbox up to its template's
	// maxCpuCount and maxMemoryMB (E2B 2.64 and 2.66; nil: the
	// template's size).
	CPUCount *int `json:"cpuCount"`
	MemoryMB *int `json:"memoryMB"`
}

// networkConfig is SandboxNetworkConfig; the egress rules arrive with
// sandbox networking.
type networkConfig struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic"`
	AllowOut           []string `json:"allowOut"`
	DenyOut            []string `json:"denyOut"`
	// MaskRequestHost is the Host header requests to the sandbox's ports
	// arrive with ("${PORT}" becomes the port).
	MaskRequestHost *string              `json:"maskRequestHost"`
	EgressProxy     *network.EgressProxy `json:"egressProxy"`
	HTTPSPorts      []int                `json:"httpsPorts"`
	DNSServers      []string             `json:"dnsServers"`
	Rules           network.Rules        `json:"rules"`
}

// defaultTimeout applies when a create names none (e2b 2.51 sends none
// unless the user gave one).
const defaultTimeout = 300

// createSandbox serves POST /sandboxes and POST /v2/sandboxes. It answers
// 201 once the sandbox's agent is ready. v2 sandboxes are always secure;
// a v2 create may carry an Idempotency-Key (keyedCreate), which v1 ignores.
func (a *API) createSandbox(w http.ResponseWriter, r *http.Request) {
	var raw []byte
	_, keyed := r.Header["Idempotency-Key"]
	if keyed = keyed && strings.HasPrefix(r.URL.Path, "/v2/"); keyed {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, errs.New(errs.InvalidArgument, "request body: %v", err))
			return
		}
		raw = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	req, err := parseCreate(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	req.Team = team(r)
	if len(req.Volumes) > 0 {
		if req.Volumes, req.Node, err = a.volumes.Mounts(r.Context(), req.Team, req.Volumes); err != nil {
			writeError(w, err)
			return
		}
	}
	if keyed {
		a.keyedCreate(w, r, req, raw)
		return
	}
	sb, err := a.svc.Create(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSandbox(sb))
}

// parseCreate reads a create request's body into the service's request.
func parseCreate(w http.ResponseWriter, r *http.Request) (service.CreateRequest, error) {
	var req newSandbox
	if err := decode(w, r, &req); err != nil {
		return service.CreateRequest{}, err
	}
	if err := notServed(rawField{"mcp", req.MCP}); err != nil {
		return service.CreateRequest{}, err
	}
	var tokens map[string]svid.Token
	if req.IAM != nil {
		tokens = req.IAM.Tokens
	}
	timeout := int64(defaultTimeout)
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	size, err := sandboxSize(req.CPUCount, req.MemoryMB)
	if err != nil {
		return service.CreateRequest{}, err
	}
	secure := strings.HasPrefix(r.URL.Path, "/v2/") || (req.Secure != nil && *req.Secure)
	autoPause := req.AutoPause != nil && *req.AutoPause
	autoResume := req.AutoResume != nil && req.AutoResume.Enabled
	pauseFiles := req.AutoPauseMemory != nil && !*req.AutoPauseMemory
	switch {
	case autoResume && !autoPause:
		return service.CreateRequest{}, errs.New(errs.InvalidArgument, "autoResume needs autoPause (onTimeout: pause)")
	case autoResume && pauseFiles:
		return service.CreateRequest{}, errs.New(errs.InvalidArgument, "autoResume cannot be combined with autoPauseMemory false: a sandbox paused without its memory boots afresh, so it is resumed with connect, not by traffic")
	}
	return service.CreateRequest{
		CreateRequest: sandboxes.CreateRequest{
			Template: req.TemplateID, Timeout: seconds(timeout), Limits: size, Sized: size != (isolation.Limits{}),
			Metadata: req.Metadata, EnvVars: req.EnvVars, Secure: secure,
			Settings: sandboxes.Settings{AutoPause: autoPause, AutoResume: autoResume, AutoPauseFiles: autoPause && pauseFiles,
				MaskRequestHost: maskHost(req.Network), HTTPSPorts: httpsPorts(req.Network)},
			Volumes:       volumeMounts(req.VolumeMounts),
			PublicTraffic: req.Network == nil || req.Network.AllowPublicTraffic == nil || *req.Network.AllowPublicTraffic,
			Rules:         rules(req.Network),
			EgressProxy:   egressProxy(req.Network),
			Tokens:        tokens,
		},
		AllowInternetAccess: req.AllowInternetAccess,
		EgressAllow:         egress(req.Network, true), EgressDeny: egress(req.Network, false),
		DNSServers: dnsServers(req.Network),
	}, nil
}

// sandboxSize is the size a create asks for (zero fields: the
// template's); the node checks it against the template's maxima.
func sandboxSize(cpus, memoryMB *int) (isolation.Limits, error) {
	var l isolation.Limits
	if cpus != nil {
		if *cpus < 1 || *cpus > 64 {
			return l, errs.New(errs.InvalidArgument, "cpuCount must be 1 to 64")
		}
		l.CPUMillis = int64(*cpus) * 1000
	}
	if memoryMB != nil {
		if *memoryMB < 128 || *memoryMB > 65536 {
			return l, errs.New(errs.InvalidArgument, "memoryMB must be 128 to 65536")
		}
		l.MemoryMB = int64(*memoryMB)
	}
	return l, nil
}

func dnsServers(n *networkConfig) []string {
	if n == nil {
		return nil
	}
	return n.DNSServers
}

func httpsPorts(n *networkConfig) []int {
	if n == nil {
		return nil
	}
	return n.HTTPSPorts
}

func maskHost(n *networkConfig) string {
	if n == nil || n.MaskRequestHost == nil {
		return ""
	}
	return *n.MaskRequestHost
}

func egressProxy(n *networkConfig) *network.EgressProxy {
	if n == nil {
		return nil
	}
	return n.EgressProxy
}

func rules(n *networkConfig) network.Rules {
	if n == nil {
		return nil
	}
	return n.Rules
}

func egress(n *networkConfig, allow bool) []string {
	switch {
	case n == nil:
		return nil
	case allow:
		return n.AllowOut
	default:
		return n.DenyOut
	}
}

// volumeMounts are a create's volumes as asked for (resolved by
// Volumes.Mounts).
func volumeMounts(in []volumeMountJSON) []service.VolumeMount {
	var out []service.VolumeMount
	for _, m := range in {
		out = append(out, service.VolumeMount{Name: m.Name, Path: m.Path})
	}
	return out
}
