package proxy

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/envd/envdwire"
)

// FuzzRoute feeds arbitrary Host names and sandbox headers to the proxy's
// routing: nothing panics, a routed port is a TCP port (or -1, refused as
// a bad port), and the id keeps no client suffix.
func FuzzRoute(f *testing.F) {
	for _, s := range [][4]string{
		{"8080-iabc.localhost:3000", "", "", "/"},
		{"49983-iabc-6532622b.localhost", "", "", "/files"},
		{"localhost:3000", "iabc", "8080", "/"},
		{"localhost", "iabc-x", "99999", "/"},
		{"localhost", "iabc", "-1", "/"},
		{"0-iabc.localhost", "", "", "/"},
		{"a.b-iabc.localhost", "", "", "/"},
		{"8080-.localhost", "", "", "/"},
		{"8080-IABC.LOCALHOST", "", "", "/"},
		{"[::1]:80", "", "", "/files?path=/etc/passwd&signature=v1_x"},
		{"-8080-iabc.localhost", "", "", "/init"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	p := New(nil, nil, "localhost:3000", slog.New(slog.DiscardHandler))
	f.Fuzz(func(t *testing.T, host, idHeader, portHeader, path string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		r.URL.Path = path
		if idHeader != "" {
			r.Header.Set("E2b-Sandbox-Id", idHeader)
		}
		if portHeader != "" {
			r.Header.Set("E2b-Sandbox-Port", portHeader)
		}
		tg, ok := p.route(r)
		if !ok || tg.denied != "" {
			return
		}
		if tg.port != -1 && (tg.port < 1 || tg.port > 65535) {
			t.Fatalf("host %q, port header %q: routed to port %d", host, portHeader, tg.port)
		}
		if strings.Contains(tg.id, "-") && strings.IndexByte(tg.id, '-') > 0 {
			t.Fatalf("host %q, id header %q: id %q keeps its client suffix", host, idHeader, tg.id)
		}
		if validID(tg.id) && strings.Trim(tg.id, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			t.Fatalf("validID accepted %q", tg.id)
		}
		if idHeader == "" && portHeader == "" && tg.port == envdwire.Port && !strings.Contains(strings.ToLower(host), "49983-") {
			t.Fatalf("host %q reached the agent's port without naming it", host)
		}
	})
}
