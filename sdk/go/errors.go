package cove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"connectrpc.com/connect"
)

// Sentinel errors, for errors.Is.
var (
	ErrNotFound        = errors.New("not found")
	ErrUnauthorized    = errors.New("unauthorized")
	ErrInvalidArgument = errors.New("invalid argument")
	ErrTimeout         = errors.New("timeout")
	ErrConflict        = errors.New("conflict")
	ErrUnavailable     = errors.New("unavailable")
)

// APIError is an error answer of the server.
type APIError struct {
	Status  int    // HTTP status
	Message string // the server's message
	// Code is the server's error_code, where it gives one: E2B's
	// ("sandbox_capacity_unavailable" …) or Cove's (below).
	Code string
}

// Cove's error codes (APIError.Code).
const (
	// CodeTemplatePreparing: the template is being built; try again once
	// it is ready (its builds' status says how far).
	CodeTemplatePreparing = "template_being_prepared"
	// CodeIsolationPreparing: the isolation asked for is being prepared on
	// the server; try again later.
	CodeIsolationPreparing = "isolation_being_prepared"
	// CodeSandboxLost: the sandbox ended with its node.
	CodeSandboxLost = "sandbox_lost_with_node"
)

func (e *APIError) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Message) }

// Is maps the status to the sentinels.
func (e *APIError) Is(target error) bool {
	switch e.Status {
	case http.StatusNotFound:
		return target == ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return target == ErrUnauthorized
	case http.StatusBadRequest:
		return target == ErrInvalidArgument
	case http.StatusConflict:
		return target == ErrConflict
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return target == ErrUnavailable
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return target == ErrTimeout
	}
	return false
}

func apiError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Message string `json:"message"`
		Code    string `json:"error_code"`
	}
	if json.Unmarshal(b, &body) != nil || body.Message == "" {
		body.Message = string(b)
	}
	return &APIError{Status: resp.StatusCode, Message: body.Message, Code: body.Code}
}

// CommandExitError is a command that ran and exited non-zero.
type CommandExitError struct {
	CommandResult
}

func (e *CommandExitError) Error() string {
	if e.Err != "" {
		return "command failed: " + e.Err
	}
	return fmt.Sprintf("command failed: exit status %d", e.ExitCode)
}

// rpcError maps an agent (Connect) error to the SDK's errors.
func rpcError(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return fmt.Errorf("%s: %w", op, transportErr(err))
	}
	var kind error
	switch ce.Code() {
	case connect.CodeNotFound:
		kind = ErrNotFound
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		kind = ErrUnauthorized
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		kind = ErrInvalidArgument
	case connect.CodeAlreadyExists:
		kind = ErrConflict
	case connect.CodeDeadlineExceeded, connect.CodeCanceled:
		kind = ErrTimeout
	case connect.CodeUnavailable:
		kind = ErrUnavailable
	default:
		return fmt.Errorf("%s: %s", op, ce.Message())
	}
	return fmt.Errorf("%s: %w: %s", op, kind, ce.Message())
}

func transportErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	return err
}
