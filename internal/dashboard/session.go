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
// until when it holds, and a random nonce.
type session struct {
	Team    string `json:"t"`
	KeyHash string `json:"k"`
	Expires int64  `json:"e"` // unix seconds
	Nonce   string `json:"n"`
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

// csrf is the token the session's state-changing requests carry in a
// header: a page of another origin can send the cookie but cannot read
// this (no CORS), so it cannot send the header.
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
