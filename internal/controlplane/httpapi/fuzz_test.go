package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
)

// FuzzCreateRequest feeds arbitrary bodies to the create request's
// decoding and validation: nothing panics, every refusal is a 400, and
// what is accepted is in range.
func FuzzCreateRequest(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"templateID":"base","timeout":120}`, `{"timeout":-5}`, `{"timeout":9223372036854775807}`,
		`{"timeout":18446744074}`, `{"envVars":{"A":"1","B=C":"2"}}`, `{"envVars":{"":"x"}}`,
		`{"metadata":{"k":"v"},"secure":true,"autoPause":false}`, `{"network":{"allowOut":["1.2.3.4","*.example.com"],"denyOut":["0.0.0.0/0"]}}`,
		`{"network":{"denyOut":["::/0"]}}`, `{"network":{"allowOut":["bad domain"]}}`, `{"templateID":`, `[1,2]`, `null`, `"x"`,
		`{"timeout":1e309}`, `{"allow_internet_access":false,"network":{"allowPublicTraffic":false}}`,
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, body string, v2 bool) {
		path := "/sandboxes"
		if v2 {
			path = "/v2/sandboxes"
		}
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		w := httptest.NewRecorder()
		req, err := parseCreate(w, r)
		if err != nil {
			if errs.HTTPStatus(err) != http.StatusBadRequest {
				t.Fatalf("decoding %q: %v (%d), want a 400", body, err, errs.HTTPStatus(err))
			}
			return
		}
		if err := service.CheckCreate(&req, 24*time.Hour); err != nil {
			if errs.HTTPStatus(err) != http.StatusBadRequest {
				t.Fatalf("validating %q: %v (%d), want a 400", body, err, errs.HTTPStatus(err))
			}
			return
		}
		if req.Timeout <= 0 || req.Timeout > 24*time.Hour {
			t.Fatalf("%q: accepted a timeout of %v", body, req.Timeout)
		}
		for k, v := range req.EnvVars {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				t.Fatalf("%q: accepted the variable %q=%q", body, k, v)
			}
		}
		for _, p := range append(req.AllowOut, req.DenyOut...) {
			if !p.IsValid() || !p.Addr().Is4() || p != p.Masked() {
				t.Fatalf("%q: accepted the prefix %v", body, p)
			}
		}
	})
}

// FuzzSeconds: no count of seconds turns into a Duration of the other sign
// or a smaller magnitude than the service's 24 h maximum would catch.
func FuzzSeconds(f *testing.F) {
	for _, n := range []int64{0, 1, -1, 86400, 1 << 32, 1<<63 - 1, -1 << 63, 18446744074 / 2} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := seconds(n)
		switch {
		case n > 0 && d <= 0, n < 0 && d >= 0, n == 0 && d != 0:
			t.Fatalf("seconds(%d) = %v", n, d)
		case n > 86400 && d <= 24*time.Hour, n < -86400 && d >= -24*time.Hour:
			t.Fatalf("seconds(%d) = %v: a large count came out small", n, d)
		}
	})
}
