// Package envdwire holds what the agent's callers share with the agent
// (package envd) of its wire: its port, the protocol version it reports,
// its token header, its node-only paths, and the signature of signed file
// URLs. It is free of the agent's code and of Linux, so that the control
// plane needs no more of the agent.
package envdwire

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/errs"
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

// TokenHeader carries a sandbox's access token to its agent.
const TokenHeader = "X-Access-Token"

// ErrUnauthorized is the agent's answer to a request without a valid
// token or signature.
var ErrUnauthorized = errs.New(errs.Unauthenticated, "unauthorized access, please provide a valid access token or method signing if supported")

// Host is the host name the node's requests to an agent carry: their
// connections are pooled under it (agentclient; the proxy's for the
// agent's port too).
const Host = "agent"

// internalPaths are served to the node only; the proxy must refuse them
// from outside.
var internalPaths = []string{"/init", "/freeze", "/unfreeze", "/collapse", "/fsfreeze", "/fsthaw", "/upgrade"}

// IsInternalPath reports whether an agent path is node-only.
func IsInternalPath(p string) bool {
	for _, ip := range internalPaths {
		if p == ip || strings.HasPrefix(p, ip+"/") {
			return true
		}
	}
	return false
}

// Authorized reports whether r carries a credential the agent whose token
// is token accepts: the token header, or, on GET and POST /files, a valid
// signature. The proxy asks before it wakes a paused sandbox for r.
func Authorized(r *http.Request, token string) bool {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(token)) == 1 {
		return true
	}
	op := map[string]string{http.MethodGet: "read", http.MethodPost: "write"}[r.Method]
	if r.URL.Path != "/files" || op == "" {
		return false
	}
	q := r.URL.Query()
	return CheckSignature(q, op, q.Get("username"), token) == nil
}

// CheckSignature checks a signed file URL's query (signature, and
// signature_expiration when given) for operation op ("read" or "write")
// by username, against the agent's token.
func CheckSignature(q url.Values, op, username, token string) error {
	sig := q.Get("signature")
	if sig == "" {
		return ErrUnauthorized
	}
	var exp int64
	if v := q.Get("signature_expiration"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errs.New(errs.Unauthenticated, "invalid signature expiration")
		}
		if n < time.Now().Unix() {
			return errs.New(errs.Unauthenticated, "signature is already expired")
		}
		exp = n
	}
	want := Signature(q.Get("path"), op, username, token, exp)
	if subtle.ConstantTimeCompare([]byte(want), []byte(sig)) != 1 {
		return errs.New(errs.Unauthenticated, "invalid signature")
	}
	return nil
}
