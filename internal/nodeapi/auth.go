package nodeapi

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/errs"
)

// authInterceptor checks every call's headers with check (server side).
type authInterceptor func(http.Header) error

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a(req.Header()); err != nil {
			return nil, errs.ConnectError(err)
		}
		return next(ctx, req)
	}
}

func (a authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a(conn.RequestHeader()); err != nil {
			return errs.ConnectError(err)
		}
		return next(ctx, conn)
	}
}

// bearer adds the node token to every call (client side).
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// nodeGone marks a call that ended with the node's connection as
// Unavailable (client side): connect names a reset connection Canceled,
// as it would a caller that left, but while the caller is still there it
// is the node that went away, and another node may serve the call.
func nodeGone(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if err != nil && ctx.Err() == nil && connect.CodeOf(err) == connect.CodeCanceled {
			return nil, errs.Mark(errs.Unavailable, fmt.Errorf("the node went away during %s: %w", req.Spec().Procedure, err))
		}
		return resp, err
	}
}
