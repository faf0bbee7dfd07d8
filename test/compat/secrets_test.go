package compat

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	up.Serve(t, testutil.FakeInternet(t), upstreamHandler(v1, v2))
	runNode(t, append(sdkEnv(srv.Addr), "COMPAT_SECRET_V1="+v1, "COMPAT_SECRET_V2="+v2, "COMPAT_UPSTREAM="+testutil.InternetAddr), "secrets.test.mjs")
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the suite left sandboxes behind: %v", left)
	}
}

// upstreamHandler answers "<host> auth=v1|v2|none|other": which value
// the request's Authorization carried.
func upstreamHandler(v1, v2 string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		which := "other"
		switch r.Header.Get("Authorization") {
		case "Bearer " + v1:
			which = "v1"
		case "Bearer " + v2:
			which = "v2"
		case "":
			which = "none"
		}
		fmt.Fprintf(w, "%s auth=%s", r.Host, which)
	})
}

func secretValue() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "cove-test-secret-" + hex.EncodeToString(b)
}

// TestSecretsCluster runs secrets.test.mjs against a cluster: two API
// replicas behind a balancer (one seals what the other lists) and a node
// that reveals the secrets from the cluster's database, all with the
// operator's one key file.
func TestSecretsCluster(t *testing.T) {
	up := testutil.NewUpstream(t, "api.upstream.test", "other.upstream.test")
	t.Setenv("SSL_CERT_FILE", up.CAFile)
	key := filepath.Join(t.TempDir(), "secrets.key")
	b := make([]byte, 32)
	rand.Read(b)
	if err := os.WriteFile(key, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COVE_SECRETS_KEY_FILE", key)
	url, _ := balanced(t, func() testutil.Cluster {
		return testutil.StartCluster(t, apiKey, testutil.Postgres(t), 2, 1, "--network=true", "--network-range", "198.19.234.0/24")
	})
	npmInstall(t)
	v1, v2 := secretValue(), secretValue()
	up.Serve(t, testutil.FakeInternet(t), upstreamHandler(v1, v2))
	runNode(t, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + apiKey,
		"COMPAT_SECRET_V1=" + v1, "COMPAT_SECRET_V2=" + v2, "COMPAT_UPSTREAM=" + testutil.InternetAddr}, "secrets.test.mjs")
}
