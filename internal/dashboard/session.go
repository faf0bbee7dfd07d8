package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// session is what the dashboard's cookie holds, signed: the team and the
// hash of the API key it logged in with (a revoked key ends its sessions),
// until when it holds, and a random nonce; Operator, for a login that gave
// the operator's token too, is a digest of that token (another token
// ends the session's operator view).
type session struct {
	Team     string `json:"t"`
	KeyHash  string `json:"k"`
	Expires  int64  `json:"e"` // unix seconds
	Nonce    string `json:"n"`
	Operator string `json:"o,omitempty"`
}

var b64 = base64.RawURLEncoding

func newSession(team, keyHash string, ttl time.Duration) session {
	n := make([]byte, 16)
	_, _ = rand.Read(n)
	return session{Team: team, KeyHash: keyHash, Expires: time.Now().Add(ttl).Unix(), Nonce: b64.EncodeToString(n)}
}

func sign(secret []byte, purpose, msg string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose + "\x00" + msg))
	return b64.EncodeToString(m.Sum(nil))
}

// encode returns the cookie's value: payload.signature.
func (s session) encode(secret []byte) string {
	b, _ := json.Marshal(s)
	p := b64.EncodeToString(b)
	return p + "." + sign(secret, "session", p)
}

// csrf is the token every request of the session carries in a header
// (csrfHeader), which the page keeps in its own origin's storage: a page
// of another origin can send the cookie, and one on a sibling host can
// even plant a cookie of the session's name over plain HTTP, but neither
// can read this (no CORS) nor write the dashboard origin's storage, so a
// request whose cookie and header do not match is no session's.
func (s session) csrf(secret []byte) string {
	b, _ := json.Marshal(s)
	return sign(secret, "csrf", string(b))
}

var errBadSession = errors.New("no valid session")

// decodeSession checks a cookie's value and returns its session.
func decodeSession(secret []byte, v string, now time.Time) (session, error) {
	p, sig, ok := strings.Cut(v, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(sign(secret, "session", p))) {
		return session{}, errBadSession
	}
	b, err := b64.DecodeString(p)
	if err != nil {
		return session{}, errBadSession
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil || s.Team == "" || now.Unix() >= s.Expires {
		return session{}, errBadSession
	}
	return s, nil
}
