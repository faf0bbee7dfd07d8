// Package auth holds Cove's credentials: API keys ("e2b_" + 40 hex, kept
// only as hashes) and the per-sandbox tokens derived from a server secret.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

var keyPattern = regexp.MustCompile(`^e2b_[0-9a-f]{40}$`)

// NewAPIKey returns a fresh key: "e2b_" and 20 random bytes in hex, the
// form the E2B SDKs accept.
func NewAPIKey() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return "e2b_" + hex.EncodeToString(b[:])
}

// ValidKeyFormat reports whether key has the issued form.
func ValidKeyFormat(key string) bool { return keyPattern.MatchString(key) }

// HashAPIKey is what the store keeps of a key.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// NewSecret returns 32 random bytes for the server's token secret.
func NewSecret() ([]byte, error) {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	return b, err
}

// EnvdToken is a sandbox's agent access token: hex(HMAC-SHA256(secret, id)).
func EnvdToken(secret []byte, sandboxID string) string {
	return mac(secret, sandboxID)
}

// TrafficToken guards a sandbox's private ports.
func TrafficToken(secret []byte, sandboxID string) string {
	return mac(secret, "sandbox-traffic-"+sandboxID)
}

// SandboxTokens are a sandbox's tokens: the agent's when it is secure,
// the ports' when its traffic is not public ("" for each it has not).
func SandboxTokens(secret []byte, sandboxID string, secure, publicTraffic bool) (access, traffic string) {
	if secure {
		access = EnvdToken(secret, sandboxID)
	}
	if !publicTraffic {
		traffic = TrafficToken(secret, sandboxID)
	}
	return access, traffic
}

func mac(secret []byte, msg string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(msg))
	return hex.EncodeToString(h.Sum(nil))
}

// VolumeToken guards a volume's content API.
func VolumeToken(secret []byte, volumeID string) string {
	return mac(secret, "volume-"+volumeID)
}

// Mask is what a listing shows of a key: the first 2 and the last 4
// characters after its "e2b_".
func Mask(key string) string {
	v := strings.TrimPrefix(key, "e2b_")
	if len(v) < 6 {
		return ""
	}
	return v[:2] + v[len(v)-4:]
}
