// Package auth holds Cove's credentials: API keys ("e2b_" + 40 hex, kept
// only as hashes) and the server's secret (package tokens derives the
// per-sandbox tokens from it).
package auth

import (
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

// Mask is what a listing shows of a key: the first 2 and the last 4
// characters after its "e2b_".
func Mask(key string) string {
	v := strings.TrimPrefix(key, "e2b_")
	if len(v) < 6 {
		return ""
	}
	return v[:2] + v[len(v)-4:]
}
