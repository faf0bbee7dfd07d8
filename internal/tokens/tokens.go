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

// envd is a sandbox's agent access token: hex(HMAC-SHA256(secret, id)).
func envd(secret []byte, sandboxID string) string {
	return mac(secret, sandboxID)
}

// traffic guards a sandbox's private ports.
func traffic(secret []byte, sandboxID string) string {
	return mac(secret, "sandbox-traffic-"+sandboxID)
}

// Sandbox are a sandbox's tokens: the agent's when it is secure, the
// ports' when its traffic is not public ("" for each it has not). It is
// the one place a sandbox's tokens are derived: the node's create and
// warm pool, and the control plane's answers, all call it.
func Sandbox(secret []byte, sandboxID string, secure, publicTraffic bool) (access, ports string) {
	if secure {
		access = envd(secret, sandboxID)
	}
	if !publicTraffic {
		ports = traffic(secret, sandboxID)
	}
	return access, ports
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
