package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealth: /health answers 200 while every listener accepts, and a 503
// naming the listener and its last error while one's accepts fail.
func TestHealth(t *testing.T) {
	t.Parallel()
	failing := ListenerHealth{Addr: "127.0.0.1:3000", AcceptErrors: 7, LastError: "accept4: too many open files", LastErrorAt: time.Now()}
	accepting := ListenerHealth{Addr: "127.0.0.1:443", Accepting: true}
	for _, tc := range []struct {
		name   string
		health func() Health
		code   int
		says   string
	}{
		{"no report", nil, 200, "Health check successful"},
		{"accepting", func() Health { return Health{Listeners: []ListenerHealth{accepting}, Unauthenticated: 3, Max: 4096} }, 200, "Health check successful"},
		{"one fails", func() Health { return Health{Listeners: []ListenerHealth{accepting, failing}} }, 503, "127.0.0.1:3000 fails to accept connections (retrying): accept4: too many open files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &API{Health: tc.health}
			w := httptest.NewRecorder()
			a.health(w, httptest.NewRequest(http.MethodGet, "/health", nil))
			var got healthJSON
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.code || got.Code != tc.code || !strings.Contains(got.Message, tc.says) {
				t.Errorf("%d %s", w.Code, w.Body)
			}
			if tc.health != nil && (got.Connection == nil || len(got.Listeners) != len(tc.health().Listeners)) {
				t.Errorf("the report: %s", w.Body)
			}
		})
	}
}
