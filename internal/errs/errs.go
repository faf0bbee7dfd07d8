// Package errs classifies Cove's errors by kind. Code wraps errors with an
// operation prefix (fmt.Errorf("create netns %s: %w", id, err)) and marks the
// kind once, where it is known; the edges (Connect handlers, HTTP handlers)
// map the kind to a status code in one place: ConnectError and HTTPStatus.
// A Hint adds what the caller may do about it (retry, when, E2B's or
// Cove's error_code).
package errs

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"connectrpc.com/connect"
)

// Kind is the class of an error, independent of the transport.
type Kind int

const (
	Internal Kind = iota
	InvalidArgument
	NotFound
	AlreadyExists
	Unauthenticated
	PermissionDenied
	ResourceExhausted
	Unavailable
	Conflict
	Unimplemented
	Canceled
	// QuotaExceeded: the caller's quota is used up (HTTP 429).
	QuotaExceeded
	// DataLoss: stored state is damaged or incomplete (a saved layer that
	// no longer matches its manifest); it is refused, never used.
	DataLoss
)

var kindNames = map[Kind]string{
	Internal:          "internal",
	InvalidArgument:   "invalid argument",
	NotFound:          "not found",
	AlreadyExists:     "already exists",
	Unauthenticated:   "unauthenticated",
	PermissionDenied:  "permission denied",
	ResourceExhausted: "resource exhausted",
	Unavailable:       "unavailable",
	Conflict:          "conflict",
	Unimplemented:     "unimplemented",
	Canceled:          "canceled",
	QuotaExceeded:     "quota exceeded",
	DataLoss:          "data loss",
}

func (k Kind) String() string { return kindNames[k] }

// KindNamed is the kind whose String is name.
func KindNamed(name string) (Kind, bool) {
	for k, n := range kindNames {
		if n == name {
			return k, true
		}
	}
	return Internal, false
}

type kindError struct {
	kind Kind
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// New returns a new error of kind k with a formatted message.
func New(k Kind, format string, args ...any) error {
	return &kindError{kind: k, err: fmt.Errorf(format, args...)}
}

// Mark classifies err as kind k, keeping its text and chain.
func Mark(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: k, err: err}
}

// KindOf returns the outermost kind found in err's chain; a full disk
// (ENOSPC, EDQUOT) anywhere in an unclassified chain is ResourceExhausted;
// Internal otherwise.
func KindOf(err error) Kind {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return ResourceExhausted
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		if k, ok := KindNamed(ce.Meta().Get(KindHeader)); ok {
			return k
		}
		for k, c := range connectCodes {
			if c == ce.Code() {
				return k
			}
		}
	}
	return Internal
}

// Is reports whether err is of kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }

var connectCodes = map[Kind]connect.Code{
	Internal:          connect.CodeInternal,
	InvalidArgument:   connect.CodeInvalidArgument,
	NotFound:          connect.CodeNotFound,
	AlreadyExists:     connect.CodeAlreadyExists,
	Unauthenticated:   connect.CodeUnauthenticated,
	PermissionDenied:  connect.CodePermissionDenied,
	ResourceExhausted: connect.CodeResourceExhausted,
	Unavailable:       connect.CodeUnavailable,
	Conflict:          connect.CodeFailedPrecondition,
	Unimplemented:     connect.CodeUnimplemented,
	Canceled:          connect.CodeCanceled,
	DataLoss:          connect.CodeDataLoss,
}

var httpStatuses = map[Kind]int{
	Internal:          http.StatusInternalServerError,
	InvalidArgument:   http.StatusBadRequest,
	NotFound:          http.StatusNotFound,
	AlreadyExists:     http.StatusConflict,
	Unauthenticated:   http.StatusUnauthorized,
	PermissionDenied:  http.StatusForbidden,
	ResourceExhausted: http.StatusInsufficientStorage,
	Unavailable:       http.StatusServiceUnavailable,
	Conflict:          http.StatusConflict,
	Unimplemented:     http.StatusNotImplemented,
	Canceled:          499,
	QuotaExceeded:     http.StatusTooManyRequests,
	DataLoss:          http.StatusInternalServerError,
}

// KindHeader names an error's kind beside its Connect code, which some
// kinds share (a full disk and a used-up quota are both exhausted
// resources), or beside a plain HTTP status: Cove's own services read it
// back (KindOf, KindNamed).
const KindHeader = "Cove-Error-Kind"

// ConnectError converts err into a *connect.Error with the code of its kind.
func ConnectError(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	k := KindOf(err)
	code, ok := connectCodes[k]
	if !ok {
		code = connect.CodeResourceExhausted // QuotaExceeded
	}
	ce = connect.NewError(code, err)
	ce.Meta().Set(KindHeader, kindNames[k])
	var he *hintError
	if errors.As(err, &he) {
		ce.Meta().Set(hintHeader, he.hint.String())
	}
	return ce
}

// HTTPStatus returns the HTTP status for err's kind.
func HTTPStatus(err error) int { return httpStatuses[KindOf(err)] }
