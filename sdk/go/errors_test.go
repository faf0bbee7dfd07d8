package cove

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAPIError: an answer's status, message and error_code, and its
// status's sentinel.
func TestAPIError(t *testing.T) {
	for _, tc := range []struct {
		status        int
		body          string
		message, code string
		sentinel      error
	}{
		{503, `{"code":503,"message":"template x is being prepared","error_code":"template_being_prepared"}`, "template x is being prepared", "template_being_prepared", ErrUnavailable},
		{404, `{"code":404,"message":"sandbox i1 not found"}`, "sandbox i1 not found", "", ErrNotFound},
		{502, `bad gateway`, "bad gateway", "", nil},
	} {
		err := apiError(&http.Response{StatusCode: tc.status, Body: io.NopCloser(strings.NewReader(tc.body))})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != tc.status || ae.Message != tc.message || ae.Code != tc.code {
			t.Errorf("%s: %#v", tc.body, err)
		}
		if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: not %v", tc.body, tc.sentinel)
		}
	}
}
