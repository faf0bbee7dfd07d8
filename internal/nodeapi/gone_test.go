package nodeapi_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/nodeapi"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// TestNodeGoneMidCall: a node whose connection is reset during a call
// (it died) is Unavailable to the caller, who may go to another node;
// connect alone would call it Canceled, as if the caller had left.
func TestNodeGoneMidCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.(*net.TCPConn).SetLinger(0) // close with a reset, as a killed process's socket
		conn.Close()
	}))
	defer srv.Close()
	c, err := nodeapi.NewClient(srv.URL, "token", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(context.Background(), sandboxes.CreateRequest{Template: "base"}); !errs.Is(err, errs.Unavailable) {
		t.Errorf("a create whose node went away: %v (%v), want Unavailable", err, errs.KindOf(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, "i1"); !errs.Is(err, errs.Canceled) {
		t.Errorf("a get whose caller left: %v (%v), want Canceled", err, errs.KindOf(err))
	}
}
