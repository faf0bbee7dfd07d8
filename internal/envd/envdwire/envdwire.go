// Package envdwire holds what the agent's callers share with the agent
// (package envd) of its wire: its port, the protocol version it reports,
// and the signature of signed file URLs. It is free of the agent's code
// and of Linux, so that the control plane needs no more of the agent.
package envdwire

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
)

// Version is the envd protocol version the agent reports; the SDKs gate
// features on it.
const Version = "0.6.13"

// Port is the agent's TCP port inside the sandbox.
const Port = 49983

// Signature is the signed-URL value for path, operation ("read" or "write"),
// user and token, with an optional expiry in unix seconds (0 = none):
// "v1_" + base64(sha256("path:op:user:token[:exp]")) without padding.
func Signature(path, op, user, token string, exp int64) string {
	msg := fmt.Sprintf("%s:%s:%s:%s", path, op, user, token)
	if exp != 0 {
		msg += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(msg))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}
