package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"
	"testing"
)

func TestKindOf(t *testing.T) {
	full := &fs.PathError{Op: "write", Path: "/data/x", Err: syscall.ENOSPC}
	tests := []struct {
		name string
		err  error
		kind Kind
		http int
	}{
		{"unclassified", errors.New("boom"), Internal, http.StatusInternalServerError},
		{"marked", Mark(NotFound, errors.New("gone")), NotFound, http.StatusNotFound},
		{"wrapped mark", fmt.Errorf("get: %w", New(InvalidArgument, "bad")), InvalidArgument, http.StatusBadRequest},
		{"a full disk", fmt.Errorf("record state: %w", full), ResourceExhausted, http.StatusInsufficientStorage},
		{"over quota", fmt.Errorf("save: %w", syscall.EDQUOT), ResourceExhausted, http.StatusInsufficientStorage},
		{"a team's quota", New(QuotaExceeded, "team quota: 3 sandboxes running, at most 3"), QuotaExceeded, http.StatusTooManyRequests},
		{"a mark wins over the cause", Mark(Unavailable, full), Unavailable, http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if k := KindOf(tc.err); k != tc.kind {
				t.Errorf("KindOf = %v, want %v", k, tc.kind)
			}
			if s := HTTPStatus(tc.err); s != tc.http {
				t.Errorf("HTTPStatus = %d, want %d", s, tc.http)
			}
		})
	}
}
