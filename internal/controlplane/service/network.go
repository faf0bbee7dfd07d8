package service

import (
	"context"
	"net/netip"
	"regexp"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/node"
)

// NetworkRules are egress settings as the API gives them.
type NetworkRules struct {
	Internet          *bool
	AllowOut, DenyOut *[]string // IPs and CIDRs; nil = unchanged
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
	u := node.NetworkUpdate{Internet: r.Internet}
	if r.AllowOut != nil || r.DenyOut != nil {
		info, err := s.node.Get(id)
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
	return s.node.UpdateNetwork(id, u)
}

func egressStrings(ni *node.NetworkInfo) (allow, deny []string) {
	for _, p := range ni.AllowOut {
		allow = append(allow, p.String())
	}
	allow = append(allow, ni.AllowDomains...)
	for _, p := range ni.DenyOut {
		deny = append(deny, p.String())
	}
	return allow, deny
}
