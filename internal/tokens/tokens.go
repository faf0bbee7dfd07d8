// Package tokens derives the tokens of a sandbox and of a volume from the
// secret an installation keeps (`cove server`'s, or the cluster's, which
// its API replicas and nodes share): whoever holds the secret computes
// them from the id, so a token is neither sent between the two nor stored.
package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Envd is a sandbox's agent access token: hex(HMAC-SHA256(secret, id)).
func Envd(secret []byte, sandboxID string) string {
	return mac(secret, sandboxID)
}

// Traffic guards a sandbox's private ports.
func Traffic(secret []byte, sandboxID string) string {
	return mac(secret, "sandbox-traffic-"+sandboxID)
}

// Sandbox are a sandbox's tokens: the agent's when it is secure, the
// ports' when its traffic is not public ("" for each it has not).
func Sandbox(secret []byte, sandboxID string, secure, publicTraffic bool) (access, traffic string) {
	if secure {
		access = Envd(secret, sandboxID)
	}
	if !publicTraffic {
		traffic = Traffic(secret, sandboxID)
	}
	return access, traffic
}

// Volume guards a volume's content API.
func Volume(secret []byte, volumeID string) string {
	return mac(secret, "volume-"+volumeID)
}

func mac(secret []byte, msg string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(msg))
	return hex.EncodeToString(h.Sum(nil))
}
