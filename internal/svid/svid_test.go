package svid

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestMintVerifiesWithTheJWKS: a token verifies with the published key
// set alone (as a cloud's token exchange checks it), for its audience,
// subject and issuer, within its time; another issuer's key does not.
func TestMintVerifiesWithTheJWKS(t *testing.T) {
	dir := t.TempDir()
	key, err := LoadKey(filepath.Join(dir, "identity.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := New(key, "https://api.cove.example:8443/")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	raw, err := iss.Mint("team one", "isbx1", "sts.amazonaws.com", now)
	if err != nil {
		t.Fatal(err)
	}
	set := jwksOf(t, iss)
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	if kid := tok.Headers[0].KeyID; kid == "" || len(set.Key(kid)) != 1 {
		t.Fatalf("kid %q not in the JWKS", kid)
	}
	var claims jwt.Claims
	if err := tok.Claims(set.Key(tok.Headers[0].KeyID)[0].Key, &claims); err != nil {
		t.Fatalf("verify with the JWKS: %v", err)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: "https://api.cove.example:8443", AnyAudience: jwt.Audience{"sts.amazonaws.com"}, Time: now}, 0); err != nil {
		t.Error(err)
	}
	if claims.Subject != "spiffe://api.cove.example/team/team%20one/sandbox/isbx1" {
		t.Errorf("sub %q", claims.Subject)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Time: now.Add(TTL + time.Second)}, 0); err == nil {
		t.Error("valid past its TTL")
	}
	var disco map[string]any
	b, _ := iss.Discovery()
	if err := json.Unmarshal(b, &disco); err != nil || disco["issuer"] != "https://api.cove.example:8443" || disco["jwks_uri"] != "https://api.cove.example:8443/.well-known/jwks.json" {
		t.Errorf("discovery: %s %v", b, err)
	}

	// Another key's issuer: its JWKS does not verify the token.
	other, err := LoadKey(filepath.Join(dir, "other.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	oiss, _ := New(other, "https://api.cove.example:8443")
	if err := tok.Claims(jwksOf(t, oiss).Keys[0].Key, &claims); err == nil {
		t.Error("verified with another issuer's key")
	}
	// The key file is read again as it was made.
	again, err := LoadKey(filepath.Join(dir, "identity.key"), false)
	if err != nil || !again.Equal(key) {
		t.Errorf("reload: %v", err)
	}
}

func jwksOf(t *testing.T, iss *Issuer) jose.JSONWebKeySet {
	t.Helper()
	b, err := iss.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"d"`) {
		t.Fatalf("the JWKS holds the private key: %s", b)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	return set
}

func TestLoadKeyRefuses(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.key")
	if _, err := LoadKey(open, true); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o644)
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("not a key"), 0o600)
	for name, path := range map[string]string{"readable by others": open, "not PEM": bad, "missing": filepath.Join(dir, "none")} {
		if _, err := LoadKey(path, false); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if _, err := New(nil, "ftp://x"); err == nil {
		t.Error("an ftp issuer")
	}
}

func TestCheckTokens(t *testing.T) {
	many := map[string]Token{}
	for i := range MaxTokens + 1 {
		many[strings.Repeat("t", i+1)] = Token{Audience: "a", TokenType: TokenType}
	}
	for _, tc := range []struct {
		name   string
		tokens map[string]Token
		ok     bool
	}{
		{"good", map[string]Token{"aws": {Audience: "sts.amazonaws.com", TokenType: TokenType}}, true},
		{"none", nil, true},
		{"empty name", map[string]Token{"": {Audience: "a", TokenType: TokenType}}, false},
		{"brace", map[string]Token{"a}b": {Audience: "a", TokenType: TokenType}}, false},
		{"control", map[string]Token{"a\nb": {Audience: "a", TokenType: TokenType}}, false},
		{"other type", map[string]Token{"aws": {Audience: "a", TokenType: "x509-SVID"}}, false},
		{"no audience", map[string]Token{"aws": {TokenType: TokenType}}, false},
		{"too many", many, false},
	} {
		if err := CheckTokens(tc.tokens); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
