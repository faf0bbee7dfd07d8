package service

import (
	"context"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/secrets"
)

// NetworkRules are egress settings as the API gives them.
type NetworkRules struct {
	Internet          *bool
	AllowOut, DenyOut *[]string // IPs and CIDRs; nil = unchanged
	Rules             *network.Rules
	// SetEgressProxy replaces the upstream proxy with EgressProxy.
	SetEgressProxy bool
	EgressProxy    *network.EgressProxy
	// DNSServers replace its resolvers (empty: the node's); nil =
	// unchanged.
	DNSServers *[]string
}

// MaxDNSServers bounds network.dnsServers (E2B's bound).
const MaxDNSServers = 10

// ParseDNSServers reads network.dnsServers: at most 10 IPv4 addresses a
// sandbox could reach (none of loopback, link-local, multicast,
// unspecified or broadcast); its egress rules still apply to them.
func ParseDNSServers(servers []string) ([]netip.Addr, error) {
	if len(servers) > MaxDNSServers {
		return nil, errs.New(errs.InvalidArgument, "dnsServers: %d, at most %d", len(servers), MaxDNSServers)
	}
	var out []netip.Addr
	for _, s := range servers {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil || !a.Is4():
			return nil, errs.New(errs.InvalidArgument, "dnsServers %q: want an IPv4 address", s)
		case a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return nil, errs.New(errs.InvalidArgument, "dnsServers %q: not an address a sandbox can reach", s)
		case slices.Contains(out, a):
			return nil, errs.New(errs.InvalidArgument, "dnsServers %q: named twice", s)
		}
		out = append(out, a)
	}
	return out, nil
}

var domainPattern = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,63}\.?$`)

// Egress is a sandbox's parsed allowOut/denyOut.
type Egress struct {
	Allow, Deny  []netip.Prefix
	AllowDomains []string
}

// ParseEgress reads allowOut (IPv4 addresses, CIDRs, domain names, "*."
// wildcards) and denyOut (addresses and CIDRs). As in E2B, domains in
// allowOut need all traffic denied ("0.0.0.0/0" in denyOut).
func ParseEgress(allowOut, denyOut []string) (Egress, error) {
	var e Egress
	denyAll := false
	for _, d := range denyOut {
		p, ok := parsePrefix(d)
		if !ok {
			return e, errs.New(errs.InvalidArgument, "denyOut %q: want an IPv4 address or CIDR", d)
		}
		denyAll = denyAll || p.Bits() == 0
		e.Deny = append(e.Deny, p)
	}
	for _, a := range allowOut {
		if p, ok := parsePrefix(a); ok {
			e.Allow = append(e.Allow, p)
			continue
		}
		if !domainPattern.MatchString(strings.ToLower(a)) {
			return e, errs.New(errs.InvalidArgument, "allowOut %q: want an IPv4 address, a CIDR or a domain name", a)
		}
		e.AllowDomains = append(e.AllowDomains, strings.ToLower(a))
	}
	if len(e.AllowDomains) > 0 && !denyAll {
		return e, errs.New(errs.InvalidArgument, "domains in allowOut need all other traffic denied: add \"0.0.0.0/0\" to denyOut")
	}
	return e, nil
}

func parsePrefix(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
		return p.Masked(), true
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return netip.PrefixFrom(a, 32), true
	}
	return netip.Prefix{}, false
}

// UpdateNetwork changes a running sandbox's egress.
func (s *Service) UpdateNetwork(ctx context.Context, team, id string, r NetworkRules) error {
	if _, err := s.Get(ctx, team, id); err != nil {
		return err
	}
	u := sandboxes.NetworkUpdate{Internet: r.Internet, SetEgressProxy: r.SetEgressProxy, EgressProxy: r.EgressProxy}
	if r.DNSServers != nil {
		dns, err := ParseDNSServers(*r.DNSServers)
		if err != nil {
			return err
		}
		if dns == nil {
			dns = []netip.Addr{}
		}
		u.DNSServers = &dns
	}
	if r.EgressProxy != nil {
		if err := r.EgressProxy.Check(); err != nil {
			return err
		}
	}
	if r.Rules != nil {
		rules, err := ParseRules(*r.Rules)
		if err != nil {
			return err
		}
		if err := s.checkSecretRefs(ctx, team, ruleSecretValues(rules)); err != nil {
			return err
		}
		u.Rules = &rules
	}
	if r.AllowOut != nil || r.DenyOut != nil {
		info, err := s.node.Get(ctx, id)
		if err != nil {
			return err
		}
		// Unchanged lists keep their current value for the checks.
		var allow, deny []string
		if info.Network != nil {
			allow, deny = egressStrings(info.Network)
		}
		if r.AllowOut != nil {
			allow = *r.AllowOut
		}
		if r.DenyOut != nil {
			deny = *r.DenyOut
		}
		e, err := ParseEgress(allow, deny)
		if err != nil {
			return err
		}
		u.AllowOut, u.DenyOut, u.AllowDomains = &e.Allow, &e.Deny, &e.AllowDomains
	}
	if err := s.node.UpdateNetwork(ctx, id, u); err != nil {
		return err
	}
	s.eventOf(ctx, id, store.EventUpdated, store.ReasonAPI)
	return nil
}

func egressStrings(ni *sandboxes.NetworkInfo) (allow, deny []string) {
	for _, p := range ni.AllowOut {
		allow = append(allow, p.String())
	}
	allow = append(allow, ni.AllowDomains...)
	for _, p := range ni.DenyOut {
		deny = append(deny, p.String())
	}
	return allow, deny
}

// Caps on a sandbox's rules: what the egress proxy reads per request.
const (
	maxRuleDomains = 100
	maxDomainRules = 16
	maxRuleHeaders = 32
)

// ParseRules checks a sandbox's egress rules and returns them with their
// domains lower-cased: a domain is an exact name or "*." and a name (not
// a bare "*"); a header is a valid HTTP field the proxy may set (not one
// that frames the request), its value one line; a value's placeholders
// name secrets (Refs).
func ParseRules(rules network.Rules) (network.Rules, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if len(rules) > maxRuleDomains {
		return nil, errs.New(errs.InvalidArgument, "network.rules: %d domains, at most %d", len(rules), maxRuleDomains)
	}
	out := make(network.Rules, len(rules))
	for domain, list := range rules {
		d := strings.TrimSuffix(strings.ToLower(domain), ".")
		if !domainPattern.MatchString(d) {
			return nil, errs.New(errs.InvalidArgument, "network.rules %q: want a domain name or *. and a domain name", domain)
		}
		if _, dup := out[d]; dup {
			return nil, errs.New(errs.InvalidArgument, "network.rules: %q given twice", d)
		}
		if len(list) > maxDomainRules {
			return nil, errs.New(errs.InvalidArgument, "network.rules %q: %d rules, at most %d", d, len(list), maxDomainRules)
		}
		for _, r := range list {
			if r.Transform == nil {
				continue
			}
			if len(r.Transform.Headers) > maxRuleHeaders {
				return nil, errs.New(errs.InvalidArgument, "network.rules %q: %d headers, at most %d", d, len(r.Transform.Headers), maxRuleHeaders)
			}
			for k, v := range r.Transform.Headers {
				if !httpguts.ValidHeaderFieldName(k) || framing[http.CanonicalHeaderKey(k)] {
					return nil, errs.New(errs.InvalidArgument, "network.rules %q: header %q cannot be set", d, k)
				}
				if !httpguts.ValidHeaderFieldValue(v) {
					return nil, errs.New(errs.InvalidArgument, "network.rules %q: header %q: its value must be one line of text", d, k)
				}
				if _, _, err := secrets.Refs(v); err != nil {
					return nil, err
				}
			}
		}
		out[d] = slices.Clone(list)
	}
	return out, nil
}

// framing are the headers that frame a request or route it: a rule that
// set them would change what reaches the upstream, not what it reads.
var framing = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true}

// ruleSecretValues are the header values of rules, for checkSecretRefs.
func ruleSecretValues(rules network.Rules) []string {
	var out []string
	for _, list := range rules {
		for _, r := range list {
			if r.Transform != nil {
				for _, v := range r.Transform.Headers {
					out = append(out, v)
				}
			}
		}
	}
	return out
}
