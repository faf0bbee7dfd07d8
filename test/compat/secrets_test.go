package compat

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestSecretsAndRules runs secrets.test.mjs: the official SDK's Secret
// calls, and sandboxes whose network rules put a secret into their HTTPS
// requests to a fake upstream (in the fake internet, with a certificate
// of its own CA, which the server is told to trust) that reports which
// value it received; the sandbox never holds the value.
func TestSecretsAndRules(t *testing.T) {
	up := testutil.NewUpstream(t, "api.upstream.test", "other.upstream.test")
	t.Setenv("SSL_CERT_FILE", up.CAFile) // the server verifies upstreams with this CA alone
	srv := testutil.StartServer(t, apiKey, "--network=true", "--network-range", "198.19.236.0/24")
	npmInstall(t)
	v1, v2 := secretValue(), secretValue()
	up.Serve(t, testutil.FakeInternet(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		which := "other"
		switch got {
		case "Bearer " + v1:
			which = "v1"
		case "Bearer " + v2:
			which = "v2"
		case "":
			which = "none"
		}
		fmt.Fprintf(w, "%s auth=%s", r.Host, which)
	}))
	runNode(t, append(sdkEnv(srv.Addr), "COMPAT_SECRET_V1="+v1, "COMPAT_SECRET_V2="+v2, "COMPAT_UPSTREAM="+testutil.InternetAddr), "secrets.test.mjs")
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the suite left sandboxes behind: %v", left)
	}
}

func secretValue() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "cove-test-secret-" + hex.EncodeToString(b)
}
