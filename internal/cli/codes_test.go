package cli

import (
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	cove "github.com/covesandbox/cove/sdk/go"
)

// TestErrorCodes: the Go SDK's names for Cove's error codes, which the
// CLI matches, are the server's.
func TestErrorCodes(t *testing.T) {
	for sdk, server := range map[string]string{
		cove.CodeTemplatePreparing:  errs.CodeTemplatePreparing,
		cove.CodeIsolationPreparing: errs.CodeIsolationPreparing,
		cove.CodeSandboxLost:        errs.CodeSandboxLost,
	} {
		if sdk != server {
			t.Errorf("the SDK says %q where the server says %q", sdk, server)
		}
	}
}
