package node

import (
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/svid"
)

// TestCheckTokens: a create's workload tokens are refused when malformed,
// when its rules name one it lacks, and on a node that mints none (no
// networks, or no identity key).
func TestCheckTokens(t *testing.T) {
	aws := map[string]svid.Token{"aws": {Audience: "sts.example.com", TokenType: svid.TokenType}}
	naming := func(name string) network.Rules {
		return network.Rules{"api.example.com": {{Transform: &network.Transform{Headers: map[string]string{"Authorization": "Bearer ${e2b.identity.tokens." + name + "}"}}}}}
	}
	for _, tc := range []struct {
		name string
		req  CreateRequest
		kind errs.Kind // 0: accepted
	}{
		{"no tokens", CreateRequest{}, 0},
		{"a rule naming a token the create lacks", CreateRequest{Rules: naming("aws")}, errs.InvalidArgument},
		{"another token type", CreateRequest{Tokens: map[string]svid.Token{"aws": {Audience: "a", TokenType: "x509-SVID"}}}, errs.InvalidArgument},
		{"tokens on a node that mints none", CreateRequest{Tokens: aws, Rules: naming("aws")}, errs.Unimplemented},
	} {
		err := (&Manager{}).checkTokens(tc.req)
		if tc.kind == 0 && err != nil || tc.kind != 0 && errs.KindOf(err) != tc.kind {
			t.Errorf("%s: %v, want kind %v", tc.name, err, tc.kind)
		}
	}
}
