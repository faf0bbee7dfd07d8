package nodeapi

import (
	"encoding/json"
	"net/netip"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/network"
	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/svid"
)

// The node-internal API carries what an API replica needs of a sandbox;
// what only the node uses (its handle, layers, saved states) stays there.

func limitsToPB(l isolation.Limits) *pb.Limits {
	return &pb.Limits{CpuMillis: l.CPUMillis, MemoryMb: l.MemoryMB, DiskMb: l.DiskMB, Pids: l.PIDs}
}

func limitsFromPB(l *pb.Limits) isolation.Limits {
	return isolation.Limits{CPUMillis: l.GetCpuMillis(), MemoryMB: l.GetMemoryMb(), DiskMB: l.GetDiskMb(), PIDs: l.GetPids()}
}

func prefixStrings(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func parsePrefixes(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, errs.New(errs.InvalidArgument, "network rule %q: %v", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func infoToPB(in sandboxes.Info) *pb.Sandbox {
	out := &pb.Sandbox{
		Id: in.ID, TemplateId: in.TemplateID, BuildId: in.BuildID, Team: in.Team, Isolation: in.Isolation,
		State: string(in.State), Limits: limitsToPB(in.Limits),
		StartedAt: timestamppb.New(in.StartedAt), EndAt: timestamppb.New(in.EndAt),
		Metadata: in.Metadata, EnvVars: in.EnvVars, AccessToken: in.AccessToken, TrafficToken: in.TrafficToken,
		Settings: settingsToPB(in.Settings), Layers: sandboxes.LayerNames(in.Layers), Volumes: mountsToPB(in.Volumes),
		Timeout: durationpb.New(in.Timeout), ExitReason: string(in.Exit.Reason), ExitDetail: in.Exit.Detail,
	}
	out.PausedState = pausedState(in)
	out.AgentUnresponsive = in.Rest.Unresponsive
	if n := in.Network; n != nil {
		out.Network = &pb.Network{Slot: int32(n.Slot), Addr: n.Addr, Internet: n.Internet,
			AllowOut: prefixStrings(n.AllowOut), DenyOut: prefixStrings(n.DenyOut), AllowDomains: n.AllowDomains, Rules: rulesToPB(n.Rules),
			EgressProxy: egressProxyToPB(n.EgressProxy), Tokens: tokensToPB(n.Tokens), DnsServers: addrStrings(n.DNSServers)}
	}
	return out
}

func infoFromPB(in *pb.Sandbox) (sandboxes.Info, error) {
	out := sandboxes.Info{
		ID: in.GetId(), TemplateID: in.GetTemplateId(), BuildID: in.GetBuildId(), Team: in.GetTeam(), Isolation: in.GetIsolation(),
		State: sandboxes.State(in.GetState()), Limits: limitsFromPB(in.GetLimits()),
		StartedAt: in.GetStartedAt().AsTime(), EndAt: in.GetEndAt().AsTime(),
		Metadata: in.GetMetadata(), EnvVars: in.GetEnvVars(), AccessToken: in.GetAccessToken(), TrafficToken: in.GetTrafficToken(),
		Settings: settingsFromPB(in.GetSettings()), Layers: in.GetLayers(), Volumes: mountsFromPB(in.GetVolumes()), PausedState: in.GetPausedState(),
		Timeout: in.GetTimeout().AsDuration(),
		Exit:    isolation.Exit{Reason: isolation.ExitReason(in.GetExitReason()), Detail: in.GetExitDetail()},
		// Of its rest, the replica sees only whether it resumes with its
		// memory.
		Rest: sandboxes.Rest{Unresponsive: in.GetAgentUnresponsive()},
	}
	if n := in.GetNetwork(); n != nil {
		allow, err := parsePrefixes(n.GetAllowOut())
		if err != nil {
			return out, err
		}
		deny, err := parsePrefixes(n.GetDenyOut())
		if err != nil {
			return out, err
		}
		dns, err := parseAddrs(n.GetDnsServers())
		if err != nil {
			return out, err
		}
		out.Network = &sandboxes.NetworkInfo{Slot: int(n.GetSlot()), Addr: n.GetAddr(), Internet: n.GetInternet(),
			AllowOut: allow, DenyOut: deny, AllowDomains: n.GetAllowDomains(), Rules: rulesFromPB(n.GetRules()),
			EgressProxy: egressProxyFromPB(n.GetEgressProxy()), Tokens: tokensFromPB(n.GetTokens()), DNSServers: dns}
	}
	return out, nil
}

func tokensToPB(t map[string]svid.Token) map[string]*pb.IdentityToken {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]*pb.IdentityToken, len(t))
	for name, tok := range t {
		out[name] = &pb.IdentityToken{Audience: tok.Audience, TokenType: tok.TokenType}
	}
	return out
}

func tokensFromPB(t map[string]*pb.IdentityToken) map[string]svid.Token {
	if len(t) == 0 {
		return nil
	}
	out := make(map[string]svid.Token, len(t))
	for name, tok := range t {
		out[name] = svid.Token{Audience: tok.GetAudience(), TokenType: tok.GetTokenType()}
	}
	return out
}

func egressProxyToPB(e *network.EgressProxy) *pb.EgressProxy {
	if e == nil {
		return nil
	}
	out := &pb.EgressProxy{Address: e.Address, Username: e.Username, Password: e.Password}
	if t := e.TLS; t != nil {
		out.Tls = &pb.EgressProxyTLS{ServerName: t.ServerName, CaCert: t.CACert}
	}
	return out
}

func egressProxyFromPB(e *pb.EgressProxy) *network.EgressProxy {
	if e == nil {
		return nil
	}
	out := &network.EgressProxy{Address: e.GetAddress(), Username: e.GetUsername(), Password: e.GetPassword()}
	if t := e.GetTls(); t != nil {
		out.TLS = &network.ProxyTLS{ServerName: t.GetServerName(), CACert: t.GetCaCert()}
	}
	return out
}

// rulesToPB are egress rules as they cross the wire.
func rulesToPB(r network.Rules) map[string]*pb.Rules {
	if len(r) == 0 {
		return nil
	}
	out := make(map[string]*pb.Rules, len(r))
	for domain, rules := range r {
		list := &pb.Rules{}
		for _, rule := range rules {
			var headers map[string]string
			if rule.Transform != nil {
				headers = rule.Transform.Headers
			}
			list.Rules = append(list.Rules, &pb.Rule{Headers: headers})
		}
		out[domain] = list
	}
	return out
}

func rulesFromPB(r map[string]*pb.Rules) network.Rules {
	if len(r) == 0 {
		return nil
	}
	out := make(network.Rules, len(r))
	for domain, list := range r {
		rules := []network.Rule{}
		for _, rule := range list.GetRules() {
			var t *network.Transform
			if h := rule.GetHeaders(); len(h) > 0 {
				t = &network.Transform{Headers: h}
			}
			rules = append(rules, network.Rule{Transform: t})
		}
		out[domain] = rules
	}
	return out
}

// mountsToPB are a sandbox's volumes as they cross the wire: by id; the
// node binds its own.
func mountsToPB(vs []sandboxes.VolumeMount) []*pb.VolumeMount {
	var out []*pb.VolumeMount
	for _, v := range vs {
		out = append(out, &pb.VolumeMount{Id: v.ID, Name: v.Name, Path: v.Path})
	}
	return out
}

func mountsFromPB(vs []*pb.VolumeMount) []sandboxes.VolumeMount {
	var out []sandboxes.VolumeMount
	for _, v := range vs {
		out = append(out, sandboxes.VolumeMount{ID: v.GetId(), Name: v.GetName(), Path: v.GetPath()})
	}
	return out
}

// createToPB is a create as it crosses the wire. A template in the making
// (resolved on the API's side) cannot.
func createToPB(r sandboxes.CreateRequest) (*pb.CreateRequest, error) {
	if r.Resolved != nil {
		return nil, errs.New(errs.Unimplemented, "a create from a template in the making does not cross to a node")
	}
	out := &pb.CreateRequest{
		Id: r.ID, Template: r.Template, BuildId: r.BuildID, Timeout: durationpb.New(r.Timeout), Limits: limitsToPB(r.Limits), Sized: r.Sized,
		EnvVars: r.EnvVars, Metadata: r.Metadata, DeriveTokens: r.DeriveTokens, Secure: r.Secure, PublicTraffic: r.PublicTraffic, AccessToken: r.AccessToken, TrafficToken: r.TrafficToken,
		NoInternet: r.NoInternet, AllowOut: prefixStrings(r.AllowOut), DenyOut: prefixStrings(r.DenyOut), AllowDomains: r.AllowDomains,
		Isolation: r.Isolation, Team: r.Team, Settings: settingsToPB(r.Settings),
		Volumes: mountsToPB(r.Volumes), Rules: rulesToPB(r.Rules), EgressProxy: egressProxyToPB(r.EgressProxy), Tokens: tokensToPB(r.Tokens),
		DnsServers: addrStrings(r.DNSServers),
	}
	savedToPB(r, out)
	return out, nil
}

// createFromPB is a create as the node takes it.
func createFromPB(r *pb.CreateRequest) (sandboxes.CreateRequest, error) {
	allow, err := parsePrefixes(r.GetAllowOut())
	if err != nil {
		return sandboxes.CreateRequest{}, err
	}
	deny, err := parsePrefixes(r.GetDenyOut())
	if err != nil {
		return sandboxes.CreateRequest{}, err
	}
	dns, err := parseAddrs(r.GetDnsServers())
	if err != nil {
		return sandboxes.CreateRequest{}, err
	}
	out := sandboxes.CreateRequest{
		DNSServers: dns,
		ID:         r.GetId(), Template: r.GetTemplate(), BuildID: r.GetBuildId(), Timeout: r.GetTimeout().AsDuration(),
		Limits: limitsFromPB(r.GetLimits()), Sized: r.GetSized(), EnvVars: r.GetEnvVars(), Metadata: r.GetMetadata(),
		AccessToken: r.GetAccessToken(), TrafficToken: r.GetTrafficToken(),
		DeriveTokens: r.GetDeriveTokens(), Secure: r.GetSecure(), PublicTraffic: r.GetPublicTraffic(),
		NoInternet: r.GetNoInternet(), AllowOut: allow, DenyOut: deny, AllowDomains: r.GetAllowDomains(),
		Isolation: r.GetIsolation(), Team: r.GetTeam(), Settings: settingsFromPB(r.GetSettings()),
		Volumes: mountsFromPB(r.GetVolumes()), Rules: rulesFromPB(r.GetRules()), EgressProxy: egressProxyFromPB(r.GetEgressProxy()), Tokens: tokensFromPB(r.GetTokens()),
	}
	return out, nil
}

func statsToPB(s isolation.Stats) *pb.SandboxStats {
	return &pb.SandboxStats{CpuUsage: durationpb.New(s.CPUUsage), CpuMillis: s.CPUMillis, MemoryUsage: s.MemoryUsage,
		MemoryLimit: s.MemoryLimit, MemoryCache: s.MemoryCache, DiskUsed: s.DiskUsed, DiskTotal: s.DiskTotal, Pids: s.PIDs, OomKills: s.OOMKills,
		EgressConnections: s.EgressConnections}
}

func statsFromPB(s *pb.SandboxStats) isolation.Stats {
	return isolation.Stats{CPUUsage: s.GetCpuUsage().AsDuration(), CPUMillis: s.GetCpuMillis(), MemoryUsage: s.GetMemoryUsage(),
		MemoryLimit: s.GetMemoryLimit(), MemoryCache: s.GetMemoryCache(), DiskUsed: s.GetDiskUsed(), DiskTotal: s.GetDiskTotal(),
		PIDs: s.GetPids(), OOMKills: s.GetOomKills(), EgressConnections: s.GetEgressConnections()}
}

func networkToPB(id string, u sandboxes.NetworkUpdate) *pb.NetworkUpdate {
	out := &pb.NetworkUpdate{Id: id, Internet: u.Internet}
	if u.AllowOut != nil {
		out.AllowOut = &pb.StringList{Values: prefixStrings(*u.AllowOut)}
	}
	if u.DenyOut != nil {
		out.DenyOut = &pb.StringList{Values: prefixStrings(*u.DenyOut)}
	}
	if u.AllowDomains != nil {
		out.AllowDomains = &pb.StringList{Values: *u.AllowDomains}
	}
	if u.Rules != nil {
		set := true
		out.SetRules, out.Rules = &set, rulesToPB(*u.Rules)
	}
	out.SetEgressProxy, out.EgressProxy = u.SetEgressProxy, egressProxyToPB(u.EgressProxy)
	if u.DNSServers != nil {
		out.DnsServers = &pb.StringList{Values: addrStrings(*u.DNSServers)}
	}
	return out
}

func networkFromPB(u *pb.NetworkUpdate) (sandboxes.NetworkUpdate, error) {
	out := sandboxes.NetworkUpdate{Internet: u.Internet}
	for _, l := range []struct {
		in  *pb.StringList
		out **[]netip.Prefix
	}{{u.GetAllowOut(), &out.AllowOut}, {u.GetDenyOut(), &out.DenyOut}} {
		if l.in == nil {
			continue
		}
		ps, err := parsePrefixes(l.in.GetValues())
		if err != nil {
			return out, err
		}
		if ps == nil {
			ps = []netip.Prefix{}
		}
		*l.out = &ps
	}
	if d := u.GetAllowDomains(); d != nil {
		vals := append([]string{}, d.GetValues()...)
		out.AllowDomains = &vals
	}
	out.SetEgressProxy, out.EgressProxy = u.GetSetEgressProxy(), egressProxyFromPB(u.GetEgressProxy())
	if u.GetSetRules() {
		rules := rulesFromPB(u.GetRules())
		out.Rules = &rules
	}
	if d := u.GetDnsServers(); d != nil {
		dns, err := parseAddrs(d.GetValues())
		if err != nil {
			return out, err
		}
		if dns == nil {
			dns = []netip.Addr{}
		}
		out.DNSServers = &dns
	}
	return out, nil
}

func addrStrings(as []netip.Addr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

func parseAddrs(ss []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range ss {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, errs.New(errs.InvalidArgument, "address %q: %v", s, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// pausedState is what another node takes a paused sandbox over from
// (Manager.Receive): its record, when its files are shared — saved by a
// pause without its memory, or its fallback copy of a pause with it (it
// then boots afresh, paused without its memory as far as the taker
// knows).
func pausedState(in sandboxes.Info) []byte {
	files := in.Rest.Files
	if files == nil || len(files.Blobs) == 0 {
		return nil
	}
	switch in.Phase() {
	case sandboxes.PhaseFiles:
	case sandboxes.PhasePaused, sandboxes.PhaseSpilling, sandboxes.PhaseOnDisk:
		in.Rest = sandboxes.Rest{Phase: sandboxes.PhaseFiles, Files: files}
		in.Layers, in.OwnLayer = files.Template.RootFS.Layers, files.Layer.Name
	default:
		return nil
	}
	b, _ := json.Marshal(in) // a record marshals
	return b
}

// portsToPB and portsFromPB carry a sandbox's HTTPS ports.
// settingsToPB and settingsFromPB carry a sandbox's settings, in a create
// and in its record alike.
func settingsToPB(s sandboxes.Settings) *pb.Settings {
	return &pb.Settings{MaskRequestHost: s.MaskRequestHost, HttpsPorts: portsToPB(s.HTTPSPorts),
		AutoPause: s.AutoPause, AutoResume: s.AutoResume, AutoPauseFiles: s.AutoPauseFiles}
}

func settingsFromPB(s *pb.Settings) sandboxes.Settings {
	return sandboxes.Settings{MaskRequestHost: s.GetMaskRequestHost(), HTTPSPorts: portsFromPB(s.GetHttpsPorts()),
		AutoPause: s.GetAutoPause(), AutoResume: s.GetAutoResume(), AutoPauseFiles: s.GetAutoPauseFiles()}
}

func portsToPB(ports []int) []int32 {
	var out []int32
	for _, p := range ports {
		out = append(out, int32(p))
	}
	return out
}

func portsFromPB(ports []int32) []int {
	var out []int
	for _, p := range ports {
		out = append(out, int(p))
	}
	return out
}
