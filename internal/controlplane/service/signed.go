package service

import (
	"context"
	"crypto/subtle"
	"strconv"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// SandboxForSignature finds the running sandbox whose access token made a
// signed file URL's signature (proxy.SignedFiles). It checks every running
// sandbox with a token: a few microseconds each.
func (s *Service) SandboxForSignature(ctx context.Context, path, operation, user, signature, expiration string) (string, bool) {
	var exp int64
	if expiration != "" {
		n, err := strconv.ParseInt(expiration, 10, 64)
		if err != nil {
			return "", false
		}
		exp = n
	}
	running, err := s.node.List(ctx)
	if err != nil {
		return "", false
	}
	for _, info := range running {
		if info.State != sandboxes.StateRunning || info.AccessToken == "" {
			continue
		}
		want := envdwire.Signature(path, operation, user, info.AccessToken, exp)
		if subtle.ConstantTimeCompare([]byte(want), []byte(signature)) == 1 {
			return info.ID, true
		}
	}
	return "", false
}
