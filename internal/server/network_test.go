package server_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestSandboxNetwork: egress through NAT to a fake internet, none when
// turned off (and back on, live), never to the metadata address or the
// host's API port; the firewall table goes with the server.
func TestSandboxNetwork(t *testing.T) {
	table := fmt.Sprintf("cove-test-%d", os.Getpid())
	t.Cleanup(func() { // registered first, so it runs after the server stopped
		c, _ := nftables.New()
		tables, _ := c.ListTables()
		for _, tb := range tables {
			if tb.Name == table {
				t.Errorf("firewall table %s left after the server stopped", table)
			}
		}
	})
	var gateway string
	s := startWith(t, func(c *server.Config) {
		dns := testutil.ServeDNS(t) // where allowOut's names lead, on the node
		dns.Set("allowed.test", 60, testutil.InternetAddr)
		dns.Set("a.wild.test", 60, testutil.InternetAddr)
		c.Network = &network.Config{Range: netip.MustParsePrefix("198.19.252.0/24"), Table: table, PoolSize: 2, NameServers: []netip.AddrPort{dns.Addr}}
		c.PoolSize = 2           // the sandboxes are warm ones: rules apply at hand-out
		gateway = "198.19.252.1" // the first network's host end
	})
	testutil.WaitWarm(t, s.dataDir, 2)
	inet := testutil.FakeInternet(t)
	// A resolver of the tenant's own (network.dnsServers), in the fake
	// internet: it answers a name the node's resolvers do not know.
	own := testutil.ServeDNSIn(t, inet, testutil.InternetAddr+":53")
	own.Set("only.mine.test", 60, "203.0.113.77")
	_, apiPort, _ := strings.Cut(strings.TrimPrefix(s.url, "http://"), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	create := func(body string) (string, string) {
		code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, body)
		if code != 201 {
			t.Fatalf("create: %d %s", code, raw)
		}
		return m["sandboxID"].(string), m["envdAccessToken"].(string)
	}
	curl := func(id, tok, url string) string {
		out, err := run(ctx, s.url, id, tok, "curl -s -m 3 "+url+" || echo unreachable")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	open, openTok := create(`{}`)
	closed, closedTok := create(`{"allow_internet_access": false}`)
	tests := []struct {
		name, id, tok, url, want string
	}{
		{"NAT egress", open, openTok, "http://" + testutil.InternetAddr + ":8080/", "hello from " + testutil.InternetAddr + ":8080 to 203.0.113.254"},
		{"no egress when off", closed, closedTok, "http://" + testutil.InternetAddr + ":8080/", "unreachable"},
		{"no metadata service", open, openTok, "http://" + testutil.MetadataAddr + "/", "unreachable"},
		{"no host API port", open, openTok, "http://" + gateway + ":" + apiPort + "/health", "unreachable"},
	}
	for _, tc := range tests {
		if got := curl(tc.id, tc.tok, tc.url); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if code, _, raw := s.do(t, "PUT", "/sandboxes/"+closed+"/network", keyA, `{"allow_internet_access": true}`); code != 204 {
		t.Fatalf("turn egress on: %d %s", code, raw)
	}
	if got := curl(closed, closedTok, "http://"+testutil.InternetAddr+":8080/"); !strings.HasPrefix(got, "hello from") {
		t.Errorf("after turning egress on: %q", got)
	}
	// Address rules, live: deny everything, then allow the one host back.
	fake := "http://" + testutil.InternetAddr + ":8080/"
	rules := []struct {
		body, want string
		status     int
	}{
		{`{"denyOut": ["0.0.0.0/0"]}`, "unreachable", 204},
		{`{}`, "hello from", 204}, // it replaces: what it omits is cleared
		{`{"denyOut": ["0.0.0.0/0"]}`, "unreachable", 204},
		{`{"allowOut": ["` + testutil.InternetAddr + `"], "denyOut": ["0.0.0.0/0"]}`, "hello from", 204},
		{`{"allow_internet_access": false}`, "unreachable", 204},
		{`{"allowOut": [], "denyOut": []}`, "hello from", 204}, // egress on again: omitted
		{`{"allowOut": ["allowed.test"]}`, "hello from", 400},  // names need all else denied
		{`{"denyOut": ["::/0"]}`, "hello from", 400},
		{`{"allowOut": ["allowed.test", "*.wild.test"], "denyOut": ["0.0.0.0/0"]}`, "unreachable", 204},
	}
	for _, r := range rules {
		if code, _, raw := s.do(t, "PUT", "/sandboxes/"+closed+"/network", keyA, r.body); code != r.status {
			t.Errorf("PUT %s: %d %s, want %d", r.body, code, raw, r.status)
		}
		if got := curl(closed, closedTok, fake); !strings.HasPrefix(got, r.want) {
			t.Errorf("after %s: %q, want %q", r.body, got, r.want)
		}
	}
	// By name, through the egress proxy: the same server, another Host.
	byName := func(host string) string {
		out, err := run(ctx, s.url, closed, closedTok, "curl -s -m 3 --resolve "+host+":80:"+testutil.InternetAddr+" http://"+host+"/ || echo unreachable")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	for host, want := range map[string]string{"allowed.test": "served allowed.test", "a.wild.test": "served a.wild.test", "denied.test": "unreachable"} {
		if got := byName(host); got != want {
			t.Errorf("by name %s: %q, want %q", host, got, want)
		}
	}
	denied, deniedTok := create(`{"network": {"denyOut": ["203.0.113.0/24"]}}`)
	if got := curl(denied, deniedTok, fake); got != "unreachable" {
		t.Errorf("created with denyOut: %q", got)
	}

	// Its own resolvers: named in its resolv.conf (a warm sandbox's
	// rewritten at its hand-out), shown in its details, reached through
	// its egress rules like any address, replaced or dropped by an update.
	for _, body := range []string{`{"network": {"dnsServers": ["127.0.0.1"]}}`, `{"network": {"dnsServers": ["169.254.169.254"]}}`, `{"network": {"dnsServers": ["example.com"]}}`} {
		if code, _, raw := s.do(t, "POST", "/v2/sandboxes", keyA, body); code != 400 || !strings.Contains(string(raw), "dnsServers") {
			t.Errorf("create with %s: %d %s, want 400 naming dnsServers", body, code, raw)
		}
	}
	mine, mineTok := create(`{"network": {"dnsServers": ["` + testutil.InternetAddr + `"]}}`)
	lookup := func() string {
		out, err := run(ctx, s.url, mine, mineTok, "getent hosts only.mine.test || echo unresolved")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(strings.TrimSpace(out) + " ")[0]
	}
	resolvConf := func() string {
		out, err := run(ctx, s.url, mine, mineTok, "cat /etc/resolv.conf")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := resolvConf(), "nameserver "+testutil.InternetAddr+"\n"; got != want {
		t.Errorf("resolv.conf with dnsServers: %q, want %q", got, want)
	}
	if got := lookup(); got != "203.0.113.77" || own.Queries() == 0 {
		t.Errorf("lookup through its own resolver: %q (%d queries there)", got, own.Queries())
	}
	_, m, _ := s.do(t, "GET", "/sandboxes/"+mine, keyA, "")
	if nw, _ := m["network"].(map[string]any); fmt.Sprint(nw["dnsServers"]) != "["+testutil.InternetAddr+"]" {
		t.Errorf("details: network %v, want its dnsServers", m["network"])
	}
	for _, u := range []struct{ body, want string }{
		{`{"denyOut": ["` + testutil.InternetAddr + `/32"], "dnsServers": ["` + testutil.InternetAddr + `"]}`, "unresolved"},
		{`{"dnsServers": ["` + testutil.InternetAddr + `"]}`, "203.0.113.77"},
		{`{"dnsServers": ["` + testutil.InternetAddr + `", "` + testutil.InternetAddr + `"]}`, "400"},
	} {
		code, _, raw := s.do(t, "PUT", "/sandboxes/"+mine+"/network", keyA, u.body)
		if u.want == "400" {
			if code != 400 {
				t.Errorf("PUT %s: %d %s, want 400", u.body, code, raw)
			}
			continue
		}
		if code != 204 {
			t.Fatalf("PUT %s: %d %s", u.body, code, raw)
		}
		if got := lookup(); got != u.want {
			t.Errorf("lookup after PUT %s: %q, want %q", u.body, got, u.want)
		}
	}
	// Left out of an update, they go: the node's resolvers again.
	if code, _, raw := s.do(t, "PUT", "/sandboxes/"+mine+"/network", keyA, `{}`); code != 204 {
		t.Fatalf("PUT {}: %d %s", code, raw)
	}
	if got := resolvConf(); strings.Contains(got, testutil.InternetAddr) {
		t.Errorf("resolv.conf after an update without dnsServers: %q", got)
	}
	for _, id := range []string{open, closed, denied, mine} {
		if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
			t.Errorf("kill %s: %d %s", id, code, raw)
		}
	}
}

// TestNetworkSurvivesRestart: a server stops with a sandbox running; the
// next start adopts it with its network and rules, and the firewall table
// goes once the last sandbox is gone.
func TestNetworkSurvivesRestart(t *testing.T) {
	table := fmt.Sprintf("cove-test-r%d", os.Getpid())
	dataDir := t.TempDir()
	// The fake internet exists when the server restarts, so it is one of
	// the host's networks then: the operator's opt-in lets sandboxes reach it.
	netCfg := &network.Config{Range: netip.MustParsePrefix("198.19.253.0/24"), Table: table, PoolSize: 1,
		Allow: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	edit := func(c *server.Config) {
		c.Network, c.DataDir, c.CgroupParent = netCfg, dataDir, "cove-test-"+filepath.Base(dataDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	curl := func(s srv, id, tok string) string {
		out, err := run(ctx, s.url, id, tok, "curl -s -m 3 http://"+testutil.InternetAddr+":8080/ || echo unreachable")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	first, stop := startStoppable(t, edit)
	testutil.FakeInternet(t)
	code, m, raw := first.do(t, "POST", "/v2/sandboxes", keyA, `{"network": {"denyOut": ["203.0.113.0/24"]}}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if got := curl(first, id, tok); got != "unreachable" {
		t.Fatalf("denied before the restart: %q", got)
	}
	stop()

	second := startWith(t, edit)
	if got := curl(second, id, tok); got != "unreachable" {
		t.Errorf("the rule did not survive the restart: %q", got)
	}
	if code, _, raw := second.do(t, "PUT", "/sandboxes/"+id+"/network", keyA, `{"denyOut": []}`); code != 204 {
		t.Fatalf("lift the rule: %d %s", code, raw)
	}
	if got := curl(second, id, tok); !strings.HasPrefix(got, "hello from") {
		t.Errorf("adopted sandbox's egress: %q", got)
	}
	if code, _, raw := second.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
		t.Errorf("kill: %d %s", code, raw)
	}
	if left := testutil.Leftovers(dataDir); len(left) > 0 {
		t.Errorf("left after the kill: %v", left)
	}
}
