package service

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/tokens"
)

// CreateRequest is a POST /sandboxes (or a fork's child): the node's
// request, which Create passes on as it is — adding the team's quota, the
// tokens' derivation, the egress rules parsed and the isolation the
// metadata names — and what only the control plane keeps of it.
type CreateRequest struct {
	sandboxes.CreateRequest
	// AllowInternetAccess is the request's own (nil: not said): listed as
	// asked; false turns the sandbox's egress off (NoInternet).
	AllowInternetAccess *bool
	// EgressAllow and EgressDeny are egress rules as asked (IPs and CIDRs;
	// domain names too in EgressAllow): CheckCreate parses them into the
	// node request's AllowOut, DenyOut and AllowDomains.
	EgressAllow, EgressDeny []string
	// DNSServers are network.dnsServers as asked: CheckCreate parses them
	// into the node request's.
	DNSServers []string
	// Alias, when set, is the name the sandbox is listed under (a fork's:
	// its parent's); else the template's name it was asked by.
	Alias string
	// Keyed, when set, is the create's claimed Idempotency-Key: its answer
	// is recorded with the sandbox.
	Keyed *Keyed
}

// Sandbox is what the API reports of a sandbox.
type Sandbox struct {
	store.Sandbox
	EnvdAccessToken    string // "" unless secure
	TrafficAccessToken string // "" unless its traffic is private
	Domain             string
	VolumeMounts       []VolumeMount
	// Network is its egress as its node has it (Get's answer only).
	Network *sandboxes.NetworkInfo
	// AgentUnresponsive: paused with its memory while its agent did not
	// answer; it resumes only booted afresh (Get's answer only).
	AgentUnresponsive bool
}

func (s *Service) view(sb store.Sandbox) Sandbox {
	v := Sandbox{Sandbox: sb, Domain: s.cfg.Domain}
	v.EnvdAccessToken, v.TrafficAccessToken = tokens.Sandbox(s.secret, sb.ID, sb.Secure, sb.PublicTraffic)
	return v
}

// MaxHTTPSPorts bounds a sandbox's network.httpsPorts (E2B's bound).
const MaxHTTPSPorts = 128

// checkHTTPSPorts checks network.httpsPorts: at most 128 ports, each a
// port, none twice, never the agent's.
func checkHTTPSPorts(ports []int) error {
	if len(ports) > MaxHTTPSPorts {
		return errs.New(errs.InvalidArgument, "network.httpsPorts: at most %d ports, not %d", MaxHTTPSPorts, len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		switch {
		case p < 1 || p > 65535:
			return errs.New(errs.InvalidArgument, "network.httpsPorts: %d is not a port", p)
		case p == envdwire.Port:
			return errs.New(errs.InvalidArgument, "network.httpsPorts: %d is the agent's port, which speaks plain HTTP", p)
		case seen[p]:
			return errs.New(errs.InvalidArgument, "network.httpsPorts: %d twice", p)
		}
		seen[p] = true
	}
	return nil
}

// CheckCreate checks what a create asks for before anything is made: the
// timeout, the environment variables and the egress rules, which it parses
// into the node's request (beside rules already there: a fork's). Every
// error is InvalidArgument.
func CheckCreate(req *CreateRequest, maxTimeout time.Duration) error {
	if req.Timeout <= 0 {
		return errs.New(errs.InvalidArgument, "Timeout must be greater than 0")
	}
	if req.Timeout > maxTimeout {
		return errs.New(errs.InvalidArgument, "Timeout cannot be greater than %d hours", int(maxTimeout.Hours()))
	}
	if strings.ContainsAny(req.MaskRequestHost, " \t\r\n/") {
		return errs.New(errs.InvalidArgument, "network.maskRequestHost %q: a host[:port] (${PORT} for the port)", req.MaskRequestHost)
	}
	if err := checkHTTPSPorts(req.HTTPSPorts); err != nil {
		return err
	}
	for k, v := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return errs.New(errs.InvalidArgument, "envVars %q: a name must be non-empty without '=' or NUL, a value without NUL", k)
		}
	}
	if err := CheckMetadata(req.Metadata); err != nil {
		return err
	}
	e, err := ParseEgress(req.EgressAllow, req.EgressDeny)
	if err != nil {
		return err
	}
	// New slices: a fork's children share their request's.
	req.AllowOut = slices.Concat(req.AllowOut, e.Allow)
	req.DenyOut = slices.Concat(req.DenyOut, e.Deny)
	req.AllowDomains = slices.Concat(req.AllowDomains, e.AllowDomains)
	if req.EgressProxy != nil {
		if err := req.EgressProxy.Check(); err != nil {
			return err
		}
	}
	if len(req.DNSServers) > 0 {
		if req.CreateRequest.DNSServers, err = ParseDNSServers(req.DNSServers); err != nil {
			return err
		}
	}
	if req.Rules, err = ParseRules(req.Rules); err != nil {
		return err
	}
	if err := svid.CheckTokens(req.Tokens); err != nil {
		return err
	}
	return network.CheckTokenRefs(req.Rules, req.Tokens)
}

// Metadata bounds: a sandbox's metadata is kept with it, listed, filtered
// on and copied into each of its lifecycle events.
const (
	MaxMetadataKeys     = 64
	MaxMetadataKeyBytes = 256
	MaxMetadataValBytes = 2048
	MaxMetadataBytes    = 16 << 10 // keys and values together
)

// CheckMetadata refuses metadata past its bounds (InvalidArgument, naming
// the bound).
func CheckMetadata(md map[string]string) error {
	if len(md) > MaxMetadataKeys {
		return errs.New(errs.InvalidArgument, "metadata has %d keys, at most %d are allowed", len(md), MaxMetadataKeys)
	}
	total := 0
	for k, v := range md {
		switch {
		case k == "":
			return errs.New(errs.InvalidArgument, "metadata: a key must not be empty")
		case len(k) > MaxMetadataKeyBytes:
			return errs.New(errs.InvalidArgument, "metadata key %.32q… is %d bytes, at most %d are allowed", k, len(k), MaxMetadataKeyBytes)
		case len(v) > MaxMetadataValBytes:
			return errs.New(errs.InvalidArgument, "metadata %q: the value is %d bytes, at most %d are allowed", k, len(v), MaxMetadataValBytes)
		}
		total += len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return errs.New(errs.InvalidArgument, "metadata is %d bytes, at most %d are allowed (keys and values together)", total, MaxMetadataBytes)
	}
	return nil
}

// IsolationKey is the metadata key that chooses a sandbox's isolation
// driver ("namespaces", "gvisor", "microvm"), which the official SDKs send unchanged.
// The driver a sandbox runs on is reported beside its metadata (the
// response's "isolation"), never added to it: the metadata is what the
// user gave.
const IsolationKey = "cove.isolation"

// Create starts a sandbox for a team and records it. It answers once the
// sandbox's agent is ready; on failure nothing is left.
func (s *Service) Create(ctx context.Context, req CreateRequest) (Sandbox, error) {
	if err := CheckCreate(&req, s.cfg.MaxTimeout); err != nil {
		return Sandbox{}, err
	}
	if s.cfg.CanUseTemplate != nil && req.Template != "" {
		if err := s.cfg.CanUseTemplate(req.Team, req.Template); err != nil {
			return Sandbox{}, err
		}
	}
	if !req.PublicTraffic && !req.Secure {
		return Sandbox{}, errs.New(errs.InvalidArgument, "allowPublicTraffic=false requires a secure sandbox")
	}
	if err := s.checkSecretRefs(ctx, req.Team, ruleSecretValues(req.Rules)); err != nil {
		return Sandbox{}, err
	}
	quota, err := s.TeamQuota(ctx, req.Team)
	if err != nil {
		return Sandbox{}, err
	}
	nreq := req.CreateRequest
	nreq.Quota = &quota
	// The node names the sandbox (a warm one has its id already) and
	// derives its tokens from the id, as view does here.
	nreq.DeriveTokens = true
	nreq.NoInternet = nreq.NoInternet || req.AllowInternetAccess != nil && !*req.AllowInternetAccess
	nreq.Isolation = cmp.Or(nreq.Isolation, nreq.Metadata[IsolationKey])
	info, err := s.node.Create(ctx, nreq)
	if err != nil {
		return Sandbox{}, err
	}
	id := info.ID
	// A template asked for by name is listed under that name (E2B's
	// alias); the built-in base's id is its name.
	alias := req.Alias
	if alias == "" && (req.Template != info.TemplateID || info.TemplateID == template.BaseName) {
		alias, _, _ = strings.Cut(req.Template, ":")
	}
	sb := store.Sandbox{
		ID: id, Team: req.Team, TemplateID: info.TemplateID, Alias: alias, State: sandboxes.StateRunning, Isolation: info.Isolation, Node: info.Node,
		StartedAt: info.StartedAt, EndAt: info.EndAt,
		CPUCount: int((info.Limits.CPUMillis + 999) / 1000), MemoryMB: int(info.Limits.MemoryMB),
		// The disk reported is the writable layer's size: what df / shows.
		DiskMB:   int(info.Limits.WritableBytes() >> 20),
		Metadata: maps.Clone(req.Metadata), AllowInternetAccess: req.AllowInternetAccess,
		AutoPause: req.AutoPause, AutoResume: req.AutoResume, Secure: req.Secure, EnvdVersion: envdwire.Version, PublicTraffic: req.PublicTraffic,
	}
	if sb.Metadata == nil {
		sb.Metadata = map[string]string{}
	}
	if k := req.Keyed; k != nil {
		sb.Answer = &store.IdempotentAnswer{Key: k.Key, Status: http.StatusCreated, Body: k.Answer(s.view(sb))}
	}
	if err := s.record(context.WithoutCancel(ctx), sb, quota); err != nil {
		if kerr := s.node.Kill(context.WithoutCancel(ctx), id); kerr != nil {
			s.log.Error("kill unrecorded sandbox", logx.SandboxID(id), logx.Err(kerr))
		}
		return Sandbox{}, err
	}
	s.teams.created(sb.Team, id)
	s.logLine(ctx, sb.Team, id, "info", "sandbox created", createdFields(sb), event(sb, store.EventCreated, store.ReasonAPI))
	// The history starts at the start.
	go func() {
		if _, err := s.sample(context.WithoutCancel(ctx), info); err != nil && !errs.Is(err, errs.NotFound) {
			s.log.Debug("sample sandbox metrics", logx.SandboxID(id), logx.Err(err))
		}
	}()
	return s.view(sb), nil
}

// record records a sandbox just created: admitted against its team's
// quota by the store where one is set (a cluster's, over every node).
func (s *Service) record(ctx context.Context, sb store.Sandbox, q sandboxes.TeamQuota) error {
	q.StorageMB = 0 // the template service's
	adm, ok := s.store.(store.Admitting)
	if !ok || q == (sandboxes.TeamQuota{}) {
		return s.store.InsertSandbox(ctx, sb)
	}
	add := sandboxes.TeamQuota{Sandboxes: 1, CPUs: sb.CPUCount, MemoryMB: int64(sb.MemoryMB), DiskMB: int64(sb.DiskMB)}
	return adm.InsertSandboxAdmitted(ctx, sb, func(u store.TeamUse) error {
		return q.Admit(sandboxes.TeamQuota{Sandboxes: u.Sandboxes, CPUs: u.CPUs, MemoryMB: u.MemoryMB, DiskMB: u.DiskMB}, add)
	})
}

// gone is the answer for a sandbox of team's that has no record: that its
// node was lost, when its log says so; else notFound.
func (s *Service) gone(ctx context.Context, team, id string, notFound error) error {
	last, err := s.store.SandboxLogs(ctx, store.LogQuery{SandboxID: id, Team: team, Backward: true, Limit: 1})
	if err != nil || len(last) == 0 || last[0].Message != store.LostMessage || last[0].Fields["reason"] != store.ReasonNodeLost {
		return notFound
	}
	return errs.Final(errs.New(errs.NotFound, "sandbox %s was lost with its node %s at %s: a running sandbox ends with its node "+
		"(a paused one, in a cluster with an object store, resumes on another); start a new one",
		id, last[0].Fields["node"], last[0].Time.UTC().Format(time.RFC3339)), errs.CodeSandboxLost)
}

// Get returns a team's sandbox; other teams' sandboxes are not found.
func (s *Service) Get(ctx context.Context, team, id string) (Sandbox, error) {
	sb, err := s.store.Sandbox(ctx, id)
	if errs.Is(err, errs.NotFound) {
		return Sandbox{}, s.gone(ctx, team, id, err)
	}
	if err != nil {
		return Sandbox{}, err
	}
	if sb.Team != team {
		return Sandbox{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	// A sandbox that is ending is gone for the API already, even while the
	// node still tears it down and before its record is dropped.
	info, err := s.node.Get(ctx, id)
	if err != nil || info.State == sandboxes.StateKilled {
		return Sandbox{}, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	v := s.view(sb)
	v.VolumeMounts, v.Network = info.Volumes, info.Network
	if info.State == sandboxes.StateRunning || info.State == sandboxes.StatePaused {
		// The node's: a pause or resume it made itself (a timeout, traffic)
		// reaches the store a moment later when another replica's node
		// made it (seen: the official SDK's getInfo just after traffic
		// woke a sandbox said paused).
		v.State = info.State
	}
	v.AgentUnresponsive = info.State == sandboxes.StatePaused && info.Rest.Unresponsive
	return v, nil
}

// Kill ends a team's sandbox.
func (s *Service) Kill(ctx context.Context, team, id string) error {
	cur, err := s.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if err := s.node.Kill(ctx, id); err != nil && !errs.Is(err, errs.NotFound) {
		return err
	}
	deleted, err := s.store.DeleteSandbox(ctx, id)
	if deleted {
		s.logLine(ctx, team, id, "info", "sandbox killed", nil, event(cur.Sandbox, store.EventKilled, store.ReasonAPI))
	}
	return err
}

// SetTimeout makes the sandbox end timeout from now; a timeout of 0 or
// less ends it now (endNow).
func (s *Service) SetTimeout(ctx context.Context, team, id string, timeout time.Duration) error {
	if timeout <= 0 {
		return s.endNow(ctx, team, id)
	}
	cur, err := s.retime(ctx, team, id, timeout, s.node.SetTimeout)
	if err != nil {
		return err
	}
	s.logLine(ctx, team, id, "info", "sandbox timeout set", map[string]string{"timeout": timeout.String()}, event(cur.Sandbox, store.EventUpdated, store.ReasonAPI))
	return nil
}

// Connect returns a sandbox, resuming it when it is paused (resumed
// true; it then ends timeout from now; reboot and size as Resume's), else
// extending its life to at least timeout from now, its size as it is
// (E2B: a connect's sizes apply only when it resumes).
func (s *Service) Connect(ctx context.Context, team, id string, timeout time.Duration, reboot bool, size isolation.Limits) (sb Sandbox, resumed bool, err error) {
	cur, err := s.Get(ctx, team, id)
	if err != nil {
		return Sandbox{}, false, err
	}
	if cur.State == sandboxes.StatePaused {
		sb, err = s.Resume(ctx, team, id, timeout, reboot, size)
		if !errs.Is(err, errs.Conflict) || errs.HintOf(err).Code == errs.CodeGuestUnresponsive { // else resumed meanwhile: extend below
			return sb, err == nil, err
		}
	}
	if _, err := s.retime(ctx, team, id, timeout, s.node.ExtendTimeout); err != nil {
		return Sandbox{}, false, err
	}
	sb, err = s.Get(ctx, team, id)
	return sb, false, err
}

// Extend moves a running sandbox's end to at least timeout from now.
func (s *Service) Extend(ctx context.Context, team, id string, timeout time.Duration) error {
	_, err := s.retime(ctx, team, id, timeout, s.node.ExtendTimeout)
	return err
}

// Pause pauses a team's running sandbox (Conflict when it is paused
// already): with its memory, frozen in place; without, its files saved
// and its processes ended, to boot again at its resume. With its memory,
// strict refuses it (Unavailable, to retry; it runs on) while its agent
// does not answer; without strict it is paused all the same, and resumes
// only booted afresh (Resume with reboot).
func (s *Service) Pause(ctx context.Context, team, id string, memory, strict bool) error {
	cur, err := s.Get(ctx, team, id)
	if err != nil {
		return err
	}
	pause := s.node.PauseFiles
	if memory {
		pause = func(ctx context.Context, id string) (sandboxes.Info, error) { return s.node.Pause(ctx, id, strict) }
	}
	info, err := pause(ctx, id)
	if err != nil {
		return err
	}
	s.logLine(ctx, team, id, "info", "sandbox paused", map[string]string{"memory": fmt.Sprint(memory)}, event(cur.Sandbox, store.EventPaused, store.ReasonAPI))
	return s.store.SetSandboxState(context.WithoutCancel(ctx), id, sandboxes.StatePaused, info.EndAt)
}

// Resume lets a team's paused sandbox run again (Conflict when it runs);
// it ends timeout from now. reboot boots it afresh over its files even
// when it was paused with its memory (E2B's memory: false). size, where
// it sets CPUs or memory, is what it resumes with (resize).
func (s *Service) Resume(ctx context.Context, team, id string, timeout time.Duration, reboot bool, size isolation.Limits) (Sandbox, error) {
	if err := s.checkTimeout(timeout); err != nil {
		return Sandbox{}, err
	}
	cur, err := s.Get(ctx, team, id)
	if err != nil {
		return Sandbox{}, err
	}
	if n, err := s.node.Get(ctx, id); reboot && err == nil && n.State == sandboxes.StatePaused {
		// Its memory is dropped: its files are saved, to boot from.
		if _, err := s.node.PauseFiles(ctx, id); err != nil && !errs.Is(err, errs.Conflict) {
			return Sandbox{}, err
		}
	}
	if size != (isolation.Limits{}) {
		if err := s.resize(ctx, cur, size); err != nil {
			return Sandbox{}, err
		}
	}
	info, err := s.node.Resume(ctx, id, timeout)
	if err != nil {
		return Sandbox{}, err
	}
	s.logLine(ctx, team, id, "info", "sandbox resumed", map[string]string{"reboot": fmt.Sprint(reboot)}, event(cur.Sandbox, store.EventResumed, store.ReasonAPI))
	if err := s.store.SetSandboxState(context.WithoutCancel(ctx), id, sandboxes.StateRunning, info.EndAt); err != nil {
		return Sandbox{}, err
	}
	return s.Get(ctx, team, id)
}

// resize gives a team's paused sandbox the size its resume asks for: its
// node bounds it (its template's maximums, the node's capacity, the
// team's quota there), then the store records it, admitted where the
// store admits against every node (the sandbox's old size aside). A
// refusal there puts the node's size back.
func (s *Service) resize(ctx context.Context, cur Sandbox, size isolation.Limits) error {
	before, err := s.node.Get(ctx, cur.ID)
	if err != nil {
		return err
	}
	quota, err := s.TeamQuota(ctx, cur.Team)
	if err != nil {
		return err
	}
	info, err := s.node.Resize(ctx, cur.ID, size, &quota)
	if err != nil {
		return err
	}
	if info.Limits == before.Limits {
		return nil
	}
	cpus, mem := int((info.Limits.CPUMillis+999)/1000), int(info.Limits.MemoryMB)
	ctx = context.WithoutCancel(ctx)
	quota.StorageMB = 0 // the template service's
	if adm, ok := s.store.(store.Admitting); ok && quota != (sandboxes.TeamQuota{}) {
		add := sandboxes.TeamQuota{Sandboxes: 1, CPUs: cpus, MemoryMB: int64(mem), DiskMB: int64(cur.DiskMB)}
		err = adm.SetSandboxSizeAdmitted(ctx, cur.ID, cur.Team, cpus, mem, func(u store.TeamUse) error {
			return quota.Admit(sandboxes.TeamQuota{Sandboxes: u.Sandboxes, CPUs: u.CPUs, MemoryMB: u.MemoryMB, DiskMB: u.DiskMB}, add)
		})
	} else {
		err = s.store.SetSandboxSize(ctx, cur.ID, cpus, mem)
	}
	if err != nil {
		if _, rerr := s.node.Resize(ctx, cur.ID, before.Limits, nil); rerr != nil {
			s.log.Error("put back a sandbox's size", logx.SandboxID(cur.ID), logx.Err(rerr))
		}
		return err
	}
	now := cur.Sandbox
	now.CPUCount, now.MemoryMB = cpus, mem
	s.logLine(ctx, cur.Team, cur.ID, "info", "sandbox resized", map[string]string{"cpuCount": fmt.Sprint(cpus), "memoryMB": fmt.Sprint(mem)}, event(now, store.EventUpdated, store.ReasonAPI))
	return nil
}

// checkTimeout refuses a timeout E2B's API refuses, with its messages.
func (s *Service) checkTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return errs.New(errs.InvalidArgument, "Timeout must be greater than 0")
	}
	if timeout > s.cfg.MaxTimeout {
		return errs.New(errs.InvalidArgument, "Timeout cannot be greater than %d hours", int(s.cfg.MaxTimeout.Hours()))
	}
	return nil
}

// retime sets a team's sandbox's end by fn and records it; it returns the
// sandbox as it was read before.
func (s *Service) retime(ctx context.Context, team, id string, timeout time.Duration, fn func(context.Context, string, time.Duration) (sandboxes.Info, error)) (Sandbox, error) {
	if err := s.checkTimeout(timeout); err != nil {
		return Sandbox{}, err
	}
	cur, err := s.Get(ctx, team, id)
	if err != nil {
		return Sandbox{}, err
	}
	info, err := fn(ctx, id, timeout)
	if err != nil {
		return Sandbox{}, err
	}
	return cur, s.store.SetSandboxEnd(ctx, id, info.EndAt)
}

// List returns one page of a team's sandboxes.
func (s *Service) List(ctx context.Context, f store.ListFilter) ([]Sandbox, error) {
	list, err := s.store.ListSandboxes(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Sandbox, 0, len(list))
	for _, sb := range list {
		info, err := s.node.Get(ctx, sb.ID)
		if err != nil || info.State == sandboxes.StateKilled {
			continue // ending: gone for the API already
		}
		v := s.view(sb)
		v.VolumeMounts = info.Volumes
		out = append(out, v)
	}
	return out, nil
}
