// Package svid mints sandboxes' workload identity tokens: JWT-SVIDs
// (SPIFFE's JWT form) signed with the operator's key, which the egress
// proxy puts into a sandbox's outbound requests where its rules ask for
// "${e2b.identity.tokens.NAME}". The issuer publishes its public key
// (OpenID Connect discovery and a JWKS), so a cloud's token exchange —
// AWS's AssumeRoleWithWebIdentity, GCP's and Azure's workload identity
// federation — can trust it. It imports nothing of the control plane: the
// node mints, the API publishes.
package svid

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
)

// TokenType is the one kind of token minted.
const TokenType = "JWT-SVID"

// TTL is how long a minted token is good for. Each request gets a fresh
// one, so a token a destination leaks is soon worthless.
const TTL = 5 * time.Minute

// Token is one of a sandbox's workload tokens (E2B's SandboxIamToken):
// what it is minted for.
type Token struct {
	Audience  string `json:"audience"`
	TokenType string `json:"tokenType"`
}

// MaxTokens caps a sandbox's workload tokens.
const MaxTokens = 16

// CheckTokens checks a sandbox's token definitions by name: a name a
// "${e2b.identity.tokens.NAME}" placeholder can carry (not empty, no
// braces or control characters), an audience, and JWT-SVID.
func CheckTokens(tokens map[string]Token) error {
	if len(tokens) > MaxTokens {
		return errs.New(errs.InvalidArgument, "iam.tokens: %d tokens, at most %d", len(tokens), MaxTokens)
	}
	for name, t := range tokens {
		if name == "" || len(name) > 64 || strings.ContainsAny(name, "{}") || strings.ContainsFunc(name, unicode.IsControl) {
			return errs.New(errs.InvalidArgument, "iam.tokens: name %q: 1 to 64 characters, no braces or control characters", name)
		}
		if t.TokenType != TokenType {
			return errs.New(errs.InvalidArgument, "iam.tokens.%s: token type %q is not supported (only %s)", name, t.TokenType, TokenType)
		}
		if t.Audience == "" || len(t.Audience) > 1024 || strings.ContainsFunc(t.Audience, unicode.IsControl) {
			return errs.New(errs.InvalidArgument, "iam.tokens.%s: an audience of 1 to 1024 characters without control characters is required", name)
		}
	}
	return nil
}

// Issuer signs tokens with one key, as the URL that publishes it.
type Issuer struct {
	url         string
	trustDomain string
	signer      jose.Signer
	public      jose.JSONWebKey
}

// New returns the issuer at issuerURL (http or https, no query) signing
// with key (ECDSA P-256: ES256). The SPIFFE trust domain of its subjects
// is the URL's host name.
func New(key *ecdsa.PrivateKey, issuerURL string) (*Issuer, error) {
	u, err := url.Parse(issuerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("identity issuer %q: want an http or https URL without a query", issuerURL)
	}
	if key.Curve != elliptic.P256() {
		return nil, errors.New("identity key: want ECDSA P-256")
	}
	public := jose.JSONWebKey{Key: key.Public(), Algorithm: string(jose.ES256), Use: "sig"}
	thumb, err := public.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	public.KeyID = base64.RawURLEncoding.EncodeToString(thumb)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: public.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &Issuer{url: strings.TrimSuffix(issuerURL, "/"), trustDomain: strings.ToLower(u.Hostname()), signer: signer, public: public}, nil
}

// URL is the issuer's URL: the tokens' "iss".
func (i *Issuer) URL() string { return i.url }

// Subject is the SPIFFE ID of a team's sandbox: the tokens' "sub".
func (i *Issuer) Subject(team, sandbox string) string {
	return "spiffe://" + i.trustDomain + "/team/" + url.PathEscape(team) + "/sandbox/" + url.PathEscape(sandbox)
}

// Mint signs a token for a team's sandbox, for audience, good for TTL
// from now.
func (i *Issuer) Mint(team, sandbox, audience string, now time.Time) (string, error) {
	claims := jwt.Claims{
		Issuer:    i.url,
		Subject:   i.Subject(team, sandbox),
		Audience:  jwt.Audience{audience},
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(now.Add(TTL)),
	}
	return jwt.Signed(i.signer).Claims(claims).Serialize()
}

// JWKS is the issuer's public key set (served at /.well-known/jwks.json).
func (i *Issuer) JWKS() ([]byte, error) {
	return json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{i.public}})
}

// Discovery is the issuer's OpenID Connect discovery document (served at
// /.well-known/openid-configuration): what a cloud's token exchange reads
// to find the key.
func (i *Issuer) Discovery() ([]byte, error) {
	return json.Marshal(map[string]any{
		"issuer":                                i.url,
		"jwks_uri":                              i.url + "/.well-known/jwks.json",
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(jose.ES256)},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "nbf"},
	})
}

// LoadKey reads the issuer's key at path: an ECDSA P-256 private key in
// PEM (PKCS #8), readable by its owner only. With create, a missing file
// is made with a new key.
func LoadKey(path string, create bool) (*ecdsa.PrivateKey, error) {
	var fresh func() ([]byte, error)
	if create {
		fresh = func() ([]byte, error) {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return nil, err
			}
			der, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				return nil, err
			}
			return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
		}
	}
	raw, err := fsutil.ReadKeyFile(path, fresh)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("identity key %s: want a PEM PRIVATE KEY (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("identity key %s: %w", path, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("identity key %s: want ECDSA P-256", path)
	}
	return key, nil
}
