package service

import (
	"slices"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/network"
)

func TestParseRules(t *testing.T) {
	rule := func(k, v string) []network.Rule {
		return []network.Rule{{Transform: &network.Transform{Headers: map[string]string{k: v}}}}
	}
	for _, tc := range []struct {
		name  string
		in    network.Rules
		keys  string // the parsed domains, sorted
		error string
	}{
		{"exact and wildcard, lower-cased", network.Rules{"API.Example.com": rule("Authorization", "Bearer ${e2b.secrets.tok}"), "*.example.org": {{}}}, "*.example.org,api.example.com", ""},
		{"none", nil, "", ""},
		{"a bare star", network.Rules{"*": rule("A", "b")}, "", "want a domain name"},
		{"an address", network.Rules{"10.0.0.1": rule("A", "b")}, "", "want a domain name"},
		{"the same domain twice", network.Rules{"a.example.com": {{}}, "A.example.com": {{}}}, "", "given twice"},
		{"a framing header", network.Rules{"a.example.com": rule("Host", "evil.test")}, "", "cannot be set"},
		{"another framing header", network.Rules{"a.example.com": rule("transfer-encoding", "chunked")}, "", "cannot be set"},
		{"a header name with a space", network.Rules{"a.example.com": rule("X Y", "v")}, "", "cannot be set"},
		{"a value of two lines", network.Rules{"a.example.com": rule("X", "a\r\nInjected: 1")}, "", "one line"},
		{"a workload token (checked against the sandbox's iam later)", network.Rules{"a.example.com": rule("X", "${e2b.identity.tokens.aws}")}, "a.example.com", ""},
		{"an unknown placeholder", network.Rules{"a.example.com": rule("X", "${e2b.vault.aws}")}, "", "not a placeholder"},
	} {
		got, err := ParseRules(tc.in)
		if tc.error != "" {
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.error)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if strings.Join(keys, ",") != tc.keys {
			t.Errorf("%s: domains %v, want %s", tc.name, keys, tc.keys)
		}
	}
}
