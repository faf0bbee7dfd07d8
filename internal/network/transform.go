package network

import (
	"context"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/secrets"
	"github.com/covesandbox/cove/internal/svid"
)

// Rule is one of a domain's egress rules (E2B's SandboxNetworkRule).
type Rule struct {
	Transform *Transform `json:"transform,omitempty"`
}

// Transform changes a matching outbound request: Headers are set on it,
// replacing any of the same name; a value may name a team's secret as
// "${e2b.secrets.NAME}" and a workload token of the sandbox as
// "${e2b.identity.tokens.NAME}", filled in (a token freshly minted) by the
// proxy for each request.
type Transform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// Rules are a sandbox's rules by domain: an exact name or "*.suffix"
// (any name below suffix, not suffix itself).
type Rules map[string][]Rule

// Match returns the rules for name: an exact key first, else the longest
// wildcard that covers it. Rule sets are not merged.
func (r Rules) Match(name string) []Rule {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if rs, ok := r[name]; ok {
		return rs
	}
	var best string
	for k := range r {
		if suffix, ok := strings.CutPrefix(k, "*."); ok && strings.HasSuffix(name, "."+suffix) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return nil
	}
	return r[best]
}

// Workload is whose a network is, for its rules' placeholders: the
// team's secrets, the sandbox's workload tokens (by name).
type Workload struct {
	Team, Sandbox string
	Tokens        map[string]svid.Token
}

// CheckTokenRefs says which workload token a rule names that tokens
// lacks (InvalidArgument), nil when they have them all.
func CheckTokenRefs(rules Rules, tokens map[string]svid.Token) error {
	for domain, list := range rules {
		for _, r := range list {
			if r.Transform == nil {
				continue
			}
			for h, v := range r.Transform.Headers {
				_, names, err := secrets.Refs(v)
				if err != nil {
					return err
				}
				for _, name := range names {
					if _, ok := tokens[name]; !ok {
						return errs.New(errs.InvalidArgument, "network.rules %q: header %s names the workload token %q, which the sandbox's iam.tokens lack", domain, h, name)
					}
				}
			}
		}
	}
	return nil
}

// Secrets reveals a team's secrets to the egress proxy.
type Secrets interface {
	Reveal(ctx context.Context, team, name string) (string, error)
}
