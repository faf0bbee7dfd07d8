package network

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"

	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/svid"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

func TestMatchDomain(t *testing.T) {
	allowed := []string{"api.example.com", "*.wild.test"}
	for name, want := range map[string]bool{
		"api.example.com": true, "API.Example.com.": true, "example.com": false, "x.api.example.com": false,
		"a.wild.test": true, "a.b.wild.test": true, "wild.test": false, "evilwild.test": false,
	} {
		if got := matchDomain(name, allowed); got != want {
			t.Errorf("matchDomain(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestDomainEgress: with all traffic denied, names in allowOut pass on
// ports 80 (HTTP Host, of every request of a connection) and 443 (TLS
// SNI) to the same server that refuses every other name, and only to
// where those names resolve on the node; other ports stay closed.
func TestDomainEgress(t *testing.T) {
	testkit.NeedRoot(t, "")
	dns := testutil.ServeDNS(t)
	dns.Set("allowed.test", 60, testutil.InternetAddr)
	dns.Set("a.wild.test", 60, testutil.InternetAddr)
	dns.Set("moved.test", 60, "203.0.113.77") // allowed, elsewhere
	m, err := New(Config{Range: netip.MustParsePrefix("198.19.249.0/24"), Table: fmt.Sprintf("cove-test-d%d", os.Getpid()), PoolSize: 1,
		NameServers: []netip.AddrPort{dns.Addr}}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Another node on the same host filters its own sandboxes only.
	other, err := New(Config{Range: netip.MustParsePrefix("198.19.245.0/24"), Table: fmt.Sprintf("cove-test-o%d", os.Getpid()), PoolSize: 1}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ns := testutil.FakeInternet(t)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served "+r.Host) })
	tlsLn, err := testutil.ListenIn(ns, testutil.InternetAddr+":443")
	must(t, err)
	ts := httptest.NewUnstartedServer(handler)
	ts.Listener = tlsLn
	ts.StartTLS()
	defer ts.Close()

	n, err := m.Acquire(context.Background(), true)
	must(t, err)
	defer m.Release(n)
	must(t, m.SetRules(n, nil, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}))
	must(t, m.SetDomains(n, []string{"allowed.test", "*.wild.test", "moved.test", "nowhere.test"}))

	dial := func(port int) net.Conn {
		var c net.Conn
		inNS(t, n.NS, func() {
			c, _ = net.DialTimeout("tcp", fmt.Sprintf("%s:%d", testutil.InternetAddr, port), 3*time.Second)
		})
		return c
	}
	httpGet := func(host string) string {
		c := dial(80)
		if c == nil {
			return ""
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	httpsGet := func(name string) string {
		c := dial(443)
		if c == nil {
			return ""
		}
		tc := tls.Client(c, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		defer tc.Close()
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			return ""
		}
		fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	tests := []struct {
		name, got, want string
	}{
		{"HTTP to an allowed name", httpGet("allowed.test"), "served allowed.test"},
		{"HTTP to a wildcard name", httpGet("a.wild.test"), "served a.wild.test"},
		{"HTTP to another name, same server", httpGet("denied.test"), ""},
		{"TLS to an allowed name", httpsGet("allowed.test"), "served allowed.test"},
		{"TLS to another name, same server", httpsGet("denied.test"), ""},
		// An allowed name takes a connection only where it leads.
		{"HTTP to an allowed name elsewhere", httpGet("moved.test"), "cove egress: moved.test does not resolve to 203.0.113.1 on this node\n"},
		{"HTTP to an allowed name that does not resolve", httpGet("nowhere.test"), "cove egress: nowhere.test does not resolve to 203.0.113.1 on this node\n"},
		{"TLS to an allowed name elsewhere", httpsGet("moved.test"), ""},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// One kept-alive plain-HTTP connection: each request's Host is
	// checked, not the first one's alone (domain fronting).
	if c := dial(80); c == nil {
		t.Error("no connection to port 80")
	} else {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for _, tc := range []struct {
			host   string
			status int
			body   string
		}{
			{"allowed.test", 200, "served allowed.test"},
			{"a.wild.test", 200, "served a.wild.test"}, // another allowed name that leads there
			{"denied.test", 403, "cove egress: denied.test is not allowed at 203.0.113.1 (each request of a connection is checked)\n"},
		} {
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", tc.host)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("a later request for %s: %v", tc.host, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || string(b) != tc.body {
				t.Errorf("a later request for %s on one connection: %d %q, want %d %q", tc.host, resp.StatusCode, b, tc.status, tc.body)
			}
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("the connection after a refused request: %v, want it closed", err)
		}
	}
	if c := dial(8080); c != nil {
		c.Close()
		t.Error("a port the proxy does not check is open despite the deny")
	}
	// The proxy listens at the gateway of the sandbox with domain rules,
	// on no other address; without rules, nowhere.
	if got, want := listening(t, m.proxy.port()), []string{n.Gateway.String()}; !slices.Equal(got, want) {
		t.Errorf("the egress proxy listens at %v, want %v", got, want)
	}
	must(t, m.SetDomains(n, nil))
	if got := listening(t, m.proxy.port()); len(got) != 0 {
		t.Errorf("the egress proxy listens at %v once no sandbox has domain rules", got)
	}
}

// listening lists the host's IPv4 addresses with a TCP socket listening on
// port (from /proc/net/tcp).
func listening(t *testing.T, port uint16) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
			continue
		}
		hexAddr, hexPort, _ := strings.Cut(f[1], ":")
		p, _ := strconv.ParseUint(hexPort, 16, 16)
		a, _ := strconv.ParseUint(hexAddr, 16, 32)
		if uint16(p) == port { // the address is little-endian
			out = append(out, netip.AddrFrom4([4]byte{byte(a), byte(a >> 8), byte(a >> 16), byte(a >> 24)}).String())
		}
	}
	slices.Sort(out)
	return out
}

// TestTransformEgress: a rule's headers reach the upstream of a matching
// name over TLS, the secret filled in on the node; the sandbox sees the
// node's CA, trusts nothing else for it, and never the secret; names
// without rules are spliced (the upstream's own certificate); a request
// for another name on the connection, a denied address, or plain HTTP to
// an address the name does not resolve to get no header.
func TestTransformEgress(t *testing.T) {
	testkit.NeedRoot(t, "")
	vault := secretsFunc(func(_ context.Context, team, name string) (string, error) {
		if team == "team-a" && name == "tok" {
			return "s3cret-value", nil
		}
		return "", fmt.Errorf("secret %s not found", name)
	})
	up := testutil.NewUpstream(t, "api.upstream.test", "other.upstream.test", "x.deep.upstream.test", "none.test", "id.upstream.test", "noid.upstream.test")
	idKey, err := svid.LoadKey(filepath.Join(t.TempDir(), "identity.key"), true)
	must(t, err)
	issuer, err := svid.New(idKey, "https://api.cove.test")
	must(t, err)
	// The node before the fake internet: its blocked ranges would hold the
	// fake internet's network.
	dns := testutil.ServeDNS(t)
	dns.Set("api.upstream.test", 60, testutil.InternetAddr)
	m, err := New(Config{Range: netip.MustParsePrefix("198.18.252.0/24"), Table: fmt.Sprintf("cove-test-t%d", os.Getpid()), PoolSize: 1,
		CADir: t.TempDir(), Secrets: vault, UpstreamRoots: up.Roots, NameServers: []netip.AddrPort{dns.Addr}}, logx.Discard())
	must(t, err)
	defer m.Close()
	m.SetIdentity(issuer)
	ns := testutil.FakeInternet(t)
	up.Serve(t, ns, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s auth=%q", r.Host, r.Header.Get("Authorization"))
	}))
	n, err := m.Acquire(context.Background(), true)
	must(t, err)
	defer m.Release(n)
	must(t, m.SetTransforms(n, Workload{Team: "team-a", Sandbox: "isbx", Tokens: map[string]svid.Token{"aws": {Audience: "sts.test", TokenType: svid.TokenType}}}, Rules{
		"api.upstream.test":    {{Transform: &Transform{Headers: map[string]string{"Authorization": "Bearer ${e2b.secrets.tok}"}}}},
		"id.upstream.test":     {{Transform: &Transform{Headers: map[string]string{"Authorization": "Bearer ${e2b.identity.tokens.aws}"}}}},
		"noid.upstream.test":   {{Transform: &Transform{Headers: map[string]string{"Authorization": "Bearer ${e2b.identity.tokens.gcp}"}}}},
		"*.deep.upstream.test": {{Transform: &Transform{Headers: map[string]string{"Authorization": "deep ${e2b.secrets.missing}"}}}},
		"*.upstream.test":      {{Transform: &Transform{Headers: map[string]string{"Authorization": "wild"}}}},
	}))
	nodeCA := x509.NewCertPool()
	nodeCA.AppendCertsFromPEM(m.EgressCA())
	get := func(name, host string, roots *x509.CertPool) string {
		var c net.Conn
		inNS(t, n.NS, func() {
			c, _ = net.DialTimeout("tcp", testutil.InternetAddr+":443", 3*time.Second)
		})
		if c == nil {
			return "no connection"
		}
		tc := tls.Client(c, &tls.Config{ServerName: name, RootCAs: roots})
		defer tc.Close()
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			return "handshake: " + err.Error()
		}
		fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: mine\r\nConnection: close\r\n\r\n", host)
		return httpAnswer(tc)
	}
	tests := []struct{ what, got, want string }{
		{"exact rule: the secret filled in", get("api.upstream.test", "api.upstream.test", nodeCA), `200 api.upstream.test auth="Bearer s3cret-value"`},
		{"the longest wildcard wins, no secret in it", get("other.upstream.test", "other.upstream.test", nodeCA), `200 other.upstream.test auth="wild"`},
		{"an unknown secret fails the request", get("x.deep.upstream.test", "x.deep.upstream.test", nodeCA), "502 cove egress: header Authorization for x.deep.upstream.test: secret missing not found"},
		{"another Host on the connection", get("api.upstream.test", "other.upstream.test", nodeCA), "421 cove egress: this connection was opened for api.upstream.test"},
		{"no rule: spliced, the upstream's own certificate", get("none.test", "none.test", up.Roots), `200 none.test auth="mine"`},
		{"a token the sandbox has not", get("noid.upstream.test", "noid.upstream.test", nodeCA), `502 cove egress: header Authorization for noid.upstream.test: the sandbox has no workload token "gcp" (iam.tokens)`},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	// A workload token, minted for the request: it verifies with the
	// issuer's published keys, for its audience, as the sandbox.
	got := get("id.upstream.test", "id.upstream.test", nodeCA)
	raw, ok := strings.CutPrefix(got, `200 id.upstream.test auth="Bearer `)
	if !ok {
		t.Fatalf("workload token: %q", got)
	}
	tok, err := jwt.ParseSigned(strings.TrimSuffix(raw, `"`), []jose.SignatureAlgorithm{jose.ES256})
	must(t, err)
	var set jose.JSONWebKeySet
	jwks, _ := issuer.JWKS()
	must(t, json.Unmarshal(jwks, &set))
	var claims jwt.Claims
	must(t, tok.Claims(set.Keys[0].Key, &claims))
	if err := claims.Validate(jwt.Expected{Issuer: "https://api.cove.test", Subject: "spiffe://api.cove.test/team/team-a/sandbox/isbx", AnyAudience: jwt.Audience{"sts.test"}}); err != nil {
		t.Errorf("workload token's claims: %v (%+v)", err, claims)
	}
	if got := get("api.upstream.test", "api.upstream.test", up.Roots); !strings.HasPrefix(got, "handshake:") {
		t.Errorf("a transformed name shows the upstream's certificate, not the node CA's: %q", got)
	}
	// Through an upstream proxy over TLS: the rule's request goes inside
	// SOCKS5 inside TLS.
	proxyCA := testutil.NewUpstream(t, "socks.upstream.test")
	socks := proxyCA.ServeSOCKSTLS(t, ns, testutil.InternetAddr+":1443", "u", "p")
	must(t, m.SetEgressProxy(context.Background(), n, &EgressProxy{Address: testutil.InternetAddr + ":1443", Username: "u", Password: "p",
		TLS: &ProxyTLS{ServerName: "socks.upstream.test", CACert: proxyCA.CAPEM(t)}}))
	if got, want := get("api.upstream.test", "api.upstream.test", nodeCA), `200 api.upstream.test auth="Bearer s3cret-value"`; got != want || len(socks.Reached()) != 1 {
		t.Errorf("a rule's request through a proxy over TLS: %q, want %q (the proxy reached %v)", got, want, socks.Reached())
	}
	must(t, m.SetEgressProxy(context.Background(), n, nil))
	// Plain HTTP: the secret is set where the name resolves to the address
	// dialled, and refused, saying why, where it does not.
	plain := func(host string) string {
		var c net.Conn
		inNS(t, n.NS, func() { c, _ = net.DialTimeout("tcp", testutil.InternetAddr+":80", 3*time.Second) })
		if c == nil {
			return "no connection"
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
		return httpAnswer(c)
	}
	for _, tc := range []struct{ host, want string }{
		{"api.upstream.test", `200 served api.upstream.test auth="Bearer s3cret-value"`},
		{"other.upstream.test", "403 cove egress: other.upstream.test does not resolve to 203.0.113.1 on this node; its rules apply only there"},
	} {
		if got := plain(tc.host); got != tc.want {
			t.Errorf("plain HTTP for %s: %q, want %q", tc.host, got, tc.want)
		}
	}
	// Rules grant no access: with the address denied, nothing passes.
	must(t, m.SetRules(n, nil, []netip.Prefix{netip.MustParsePrefix(testutil.InternetAddr + "/32")}))
	if got := get("api.upstream.test", "api.upstream.test", nodeCA); !strings.HasPrefix(got, "handshake:") && got != "no connection" {
		t.Errorf("denied address, transformed name: %q", got)
	}
	must(t, m.SetRules(n, nil, nil))
	must(t, m.SetInternet(n, false))
	if got := get("api.upstream.test", "api.upstream.test", nodeCA); !strings.HasPrefix(got, "handshake:") && got != "no connection" {
		t.Errorf("egress off, transformed name: %q", got)
	}
}

// httpAnswer reads an HTTP answer from c: "<status> <body>".
func httpAnswer(c net.Conn) string {
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "response: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strconv.Itoa(resp.StatusCode) + " " + strings.TrimSpace(string(b))
}

type secretsFunc func(ctx context.Context, team, name string) (string, error)

func (f secretsFunc) Reveal(ctx context.Context, team, name string) (string, error) {
	return f(ctx, team, name)
}

// TestUpstreamEgressProxy: with an upstream SOCKS5 proxy a sandbox's TCP
// on any port leaves through it (with its credentials, from the node),
// rules first: a denied address never reaches it; wrong credentials fail;
// a proxy the node may not reach is refused.
func TestUpstreamEgressProxy(t *testing.T) {
	testkit.NeedRoot(t, "")
	m, err := New(Config{Range: netip.MustParsePrefix("198.18.253.0/24"), Table: fmt.Sprintf("cove-test-u%d", os.Getpid()), PoolSize: 1}, logx.Discard())
	must(t, err)
	defer m.Close()
	ns := testutil.FakeInternet(t)
	socks := testutil.ServeSOCKS(t, ns, testutil.InternetAddr+":1080", "u", "p")
	n, err := m.Acquire(context.Background(), true)
	must(t, err)
	defer m.Release(n)
	ctx := context.Background()
	get := func(port int) string {
		var c net.Conn
		inNS(t, n.NS, func() {
			c, _ = net.DialTimeout("tcp", fmt.Sprintf("%s:%d", testutil.InternetAddr, port), 3*time.Second)
		})
		if c == nil {
			return "no connection"
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x.test\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "no answer"
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	direct := get(8080)
	if !strings.HasPrefix(direct, "hello from") || len(socks.Reached()) != 0 {
		t.Fatalf("without an upstream: %q (the upstream reached %v)", direct, socks.Reached())
	}
	udp, err := testutil.ListenUDPIn(ns, testutil.InternetAddr+":5353")
	must(t, err)
	defer udp.Close()
	// sendUDP sends a datagram from the sandbox and says whether the fake
	// internet received it.
	sendUDP := func() bool {
		inNS(t, n.NS, func() {
			if c, err := net.Dial("udp4", testutil.InternetAddr+":5353"); err == nil {
				c.Write([]byte("ping"))
				c.Close()
			}
		})
		udp.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 16)
		k, _, err := udp.ReadFrom(buf)
		return err == nil && string(buf[:k]) == "ping"
	}
	if !sendUDP() {
		t.Fatal("UDP without an upstream did not arrive")
	}
	must(t, m.SetEgressProxy(ctx, n, &EgressProxy{Address: testutil.InternetAddr + ":1080", Username: "u", Password: "p"}))
	if sendUDP() {
		t.Error("UDP left the sandbox beside its upstream proxy")
	}
	if got := get(8080); got != direct {
		t.Errorf("through the upstream, port 8080: %q, want %q", got, direct)
	}
	if got := get(80); got != "served x.test" {
		t.Errorf("through the upstream, port 80: %q", got)
	}
	if got, want := socks.Reached(), []string{"u@" + testutil.InternetAddr + ":8080", "u@" + testutil.InternetAddr + ":80"}; !slices.Equal(got, want) {
		t.Errorf("the upstream reached %v, want %v", got, want)
	}
	must(t, m.SetRules(n, nil, []netip.Prefix{netip.MustParsePrefix(testutil.InternetAddr + "/32")}))
	if got := get(8080); strings.HasPrefix(got, "hello") {
		t.Errorf("a denied address through the upstream: %q", got)
	}
	if len(socks.Reached()) != 2 {
		t.Errorf("a denied connection reached the upstream: %v", socks.Reached())
	}
	must(t, m.SetRules(n, nil, nil))
	must(t, m.SetEgressProxy(ctx, n, &EgressProxy{Address: testutil.InternetAddr + ":1080", Username: "u", Password: "wrong"}))
	if got := get(8080); strings.HasPrefix(got, "hello") {
		t.Errorf("wrong credentials: %q", got)
	}
	for _, addr := range []string{"127.0.0.1:1080", "169.254.169.254:1080", "10.1.2.3:1080", n.Gateway.String() + ":1080"} {
		if err := m.SetEgressProxy(ctx, n, &EgressProxy{Address: addr}); err == nil {
			t.Errorf("an upstream at %s was taken", addr)
		}
	}
	// Over TLS (egressProxy.tls): verified against the CA named, or the
	// node's roots; the name is the one given, or the address's host.
	up := testutil.NewUpstream(t, "socks.upstream.test")
	overTLS := up.ServeSOCKSTLS(t, ns, testutil.InternetAddr+":1443", "u", "p")
	for _, c := range []struct {
		name string
		tls  *ProxyTLS
		ok   bool
	}{
		{"the CA and the name", &ProxyTLS{ServerName: "socks.upstream.test", CACert: up.CAPEM(t)}, true},
		{"the node's roots", &ProxyTLS{ServerName: "socks.upstream.test"}, false},
		{"another name", &ProxyTLS{ServerName: "other.upstream.test", CACert: up.CAPEM(t)}, false},
		{"the address's host", &ProxyTLS{CACert: up.CAPEM(t)}, false},
		{"no TLS", nil, false},
	} {
		must(t, m.SetEgressProxy(ctx, n, &EgressProxy{Address: testutil.InternetAddr + ":1443", Username: "u", Password: "p", TLS: c.tls}))
		before := len(overTLS.Reached())
		got := get(8080)
		if reached := len(overTLS.Reached()) > before; c.ok != (got == direct) || c.ok != reached {
			t.Errorf("a proxy over TLS, %s: %q (reached: %v), want through: %v", c.name, got, reached, c.ok)
		}
	}
	// A server that speaks first (SSH, SMTP) is reached through the
	// upstream before the sandbox sends a byte.
	speaker, err := testutil.ListenIn(ns, testutil.InternetAddr+":2222")
	must(t, err)
	defer speaker.Close()
	go func() {
		for {
			c, err := speaker.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "banner\n")
			c.Close()
		}
	}()
	must(t, m.SetEgressProxy(ctx, n, &EgressProxy{Address: testutil.InternetAddr + ":1080", Username: "u", Password: "p"}))
	var c net.Conn
	inNS(t, n.NS, func() { c, err = net.DialTimeout("tcp", testutil.InternetAddr+":2222", 3*time.Second) })
	must(t, err)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(c).ReadString('\n'); got != "banner\n" {
		t.Errorf("a server that speaks first, through the upstream: %q (%v)", got, err)
	}
	c.Close()
	must(t, m.SetEgressProxy(ctx, n, nil))
	before := len(socks.Reached())
	if got := get(8080); got != direct || len(socks.Reached()) != before {
		t.Errorf("the upstream removed: %q, want %q (the upstream reached %v)", got, direct, socks.Reached())
	}
}
