package compat

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestEgress runs egress.test.mjs and the Python suite's test_network.py: the official SDK's Secret calls,
// sandboxes whose network rules put a secret into their HTTPS requests to
// a fake upstream (in the fake internet, with a certificate of its own
// CA, which the server is told to trust) that reports which value it
// received — the sandbox never holds the value —, workload identity
// tokens minted into them, and an upstream SOCKS5 proxy their TCP goes
// through.
func TestEgress(t *testing.T) {
	up := testutil.NewUpstream(t, "api.upstream.test", "other.upstream.test")
	srv := testutil.StartServer(t, apiKey, "--network=true", "--network-range", "198.18.250.0/24", "--egress-nameserver", upstreamDNS(t).String(),
		"--upstream-ca", up.CAFile) // the upstream's CA, besides the host's roots
	npmInstall(t)
	runEgress(t, up, sdkEnv(srv.Addr), true)
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("the suite left sandboxes behind: %v", left)
	}
}

// runEgress serves the upstream and a SOCKS5 proxy in the fake internet
// and runs egress.test.mjs with env and, with python, the Python suite's
// test_network.py; the proxy must have carried the sandbox's connections
// to the upstream, with the suite's credentials.
func runEgress(t *testing.T, up *testutil.Upstream, env []string, python bool) {
	t.Helper()
	v1, v2 := secretValue(), secretValue()
	ns := testutil.FakeInternet(t)
	up.Serve(t, ns, upstreamHandler(v1, v2))
	socks := testutil.ServeSOCKS(t, ns, testutil.InternetAddr+":1080", "proxy-user", secretValue())
	env = append(env, "COMPAT_SECRET_V1="+v1, "COMPAT_SECRET_V2="+v2, "COMPAT_UPSTREAM="+testutil.InternetAddr,
		"COMPAT_SOCKS="+socks.Addr, "COMPAT_SOCKS_USER="+socks.User, "COMPAT_SOCKS_PASS="+socks.Pass)
	runNode(t, env, "egress.test.mjs")
	if python {
		// The Python SDK's proxy over TLS (py 2.57) has a certificate of a
		// CA of its own, which the server was not told to trust.
		proxyCA := testutil.NewUpstream(t, "socks.upstream.test")
		overTLS := proxyCA.ServeSOCKSTLS(t, ns, testutil.InternetAddr+":1443", socks.User, socks.Pass)
		// A resolver of the tenant's own (network.dnsServers) beside them.
		own := testutil.ServeDNSIn(t, ns, testutil.InternetAddr+":53")
		own.Set("only.mine.test", 60, "203.0.113.77")
		runPytest(t, append(env, "COMPAT_SOCKS_TLS="+overTLS.Addr, "COMPAT_CA_FILE="+proxyCA.CAFile, "COMPAT_DNS="+testutil.InternetAddr),
			"test_network.py", "test_newer_sdk.py::test_dns_servers_name_the_sandboxs_resolvers")
		if own.Queries() == 0 {
			t.Error("no sandbox asked the resolver its dnsServers named")
		}
		if len(overTLS.Reached()) == 0 {
			t.Error("the proxy over TLS carried nothing")
		}
	}
	if got, want := socks.Reached(), "proxy-user@"+testutil.InternetAddr+":443"; !slices.Contains(got, want) {
		t.Errorf("the upstream proxy reached %v, not %s", got, want)
	}
}

// upstreamHandler answers "<host> auth=v1|v2|none|jwt:<token>|other":
// which value the request's Authorization carried (a JWT as it came, for
// the suite to verify).
func upstreamHandler(v1, v2 string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		which := "other"
		switch auth := r.Header.Get("Authorization"); {
		case auth == "Bearer "+v1:
			which = "v1"
		case auth == "Bearer "+v2:
			which = "v2"
		case auth == "":
			which = "none"
		case strings.HasPrefix(auth, "Bearer eyJ"):
			which = "jwt:" + strings.TrimPrefix(auth, "Bearer ")
		}
		fmt.Fprintf(w, "%s auth=%s", r.Host, which)
	})
}

// upstreamDNS serves where the upstream's names lead, for the node's
// egress proxy: a connection allowed by name goes only there.
func upstreamDNS(t *testing.T) netip.AddrPort {
	dns := testutil.ServeDNS(t)
	for _, name := range []string{"api.upstream.test", "other.upstream.test"} {
		dns.Set(name, 60, testutil.InternetAddr)
	}
	return dns.Addr
}

func secretValue() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "cove-test-secret-" + hex.EncodeToString(b)
}

// TestEgressCluster runs egress.test.mjs against a cluster: two API
// replicas behind a balancer (one seals what the other lists) and a node
// that reveals the secrets from the cluster's database, all with the
// operator's one key file.
func TestEgressCluster(t *testing.T) {
	up := testutil.NewUpstream(t, "api.upstream.test", "other.upstream.test")
	t.Setenv("COVE_UPSTREAM_CA", up.CAFile) // the node's flag, by its variable
	key := filepath.Join(t.TempDir(), "secrets.key")
	b := make([]byte, 32)
	rand.Read(b)
	if err := os.WriteFile(key, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COVE_SECRETS_KEY_FILE", key)
	// The replicas publish the key the node signs workload tokens with.
	idKey := filepath.Join(t.TempDir(), "identity.key")
	if _, err := svid.LoadKey(idKey, true); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COVE_IDENTITY_KEY_FILE", idKey)
	t.Setenv("COVE_IDENTITY_ISSUER", "https://identity.cove.test")
	dns := upstreamDNS(t)
	url, _ := balanced(t, func() testutil.Cluster {
		return testutil.StartCluster(t, apiKey, testutil.Postgres(t), 2, 1, "--network=true", "--network-range", "198.18.251.0/24", "--egress-nameserver", dns.String())
	})
	npmInstall(t)
	runEgress(t, up, []string{"E2B_API_URL=" + url, "E2B_SANDBOX_URL=" + url, "E2B_API_KEY=" + apiKey}, false)
}
