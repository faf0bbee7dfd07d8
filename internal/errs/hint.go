package errs

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// Hint is what an error tells its caller beyond its kind: whether the
// same request may succeed later (E2B's Should-Retry header), after how
// long (Retry-After), and E2B's error_code for it.
type Hint struct {
	// Retry: nil when unknown (no header: the SDK decides by status).
	Retry *bool
	// After is how long to wait before trying again (0: the default).
	After time.Duration
	// Code is E2B's error_code ("" none), e.g. CodeCapacity.
	Code string
}

// E2B's error codes that Cove's answers carry.
const (
	CodeCapacity          = "sandbox_capacity_unavailable"
	CodeNoCompatibleNode  = "sandbox_no_compatible_node"
	CodeCreateFailed      = "sandbox_create_failed"
	CodeInternal          = "internal_server_error"
	CodeIdempotencyBusy   = "idempotency_in_progress"
	CodeIdempotencyReused = "idempotency_request_mismatch"
	CodeSecretLimit       = "secret_limit_reached"
	// CodeGuestUnresponsive: a resume with its memory of a sandbox paused
	// while its agent did not answer.
	CodeGuestUnresponsive = "sandbox_snapshot_guest_agent_unresponsive"
)

// Cove's own error codes, for its clients (the CLI) to tell apart answers
// of one status.
const (
	CodeTemplatePreparing  = "template_being_prepared"
	CodeIsolationPreparing = "isolation_being_prepared"
	CodeSandboxLost        = "sandbox_lost_with_node"
)

var (
	yes, no = true, false
	// kindRetry is whether a request that failed with a kind may succeed
	// as it is: never for one the caller must change; unknown (nil) where
	// it depends (Hinted errors say).
	kindRetry = map[Kind]*bool{
		InvalidArgument:   &no,
		NotFound:          &no,
		AlreadyExists:     &no,
		Unauthenticated:   &no,
		PermissionDenied:  &no,
		Conflict:          &no,
		Unimplemented:     &no,
		DataLoss:          &no,
		QuotaExceeded:     &no, // a stored quota; a cap of what runs is hinted
		ResourceExhausted: &no,
	}
)

type hintError struct {
	hint Hint
	err  error
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

// WithHint adds h to err, keeping its kind, text and chain.
func WithHint(err error, h Hint) error {
	if err == nil {
		return nil
	}
	return &hintError{hint: h, err: err}
}

// Retryable marks err as one the same request may get past later, after
// about after (0: the default), with E2B's error code (or "").
func Retryable(err error, after time.Duration, code string) error {
	return WithHint(err, Hint{Retry: &yes, After: after, Code: code})
}

// Final marks err as one the same request will get again, with E2B's
// error code (or "").
func Final(err error, code string) error {
	return WithHint(err, Hint{Retry: &no, Code: code})
}

// hintHeader carries a hint across Connect, as KindHeader a kind.
const hintHeader = "Cove-Error-Hint"

// HintOf is the outermost hint in err's chain (one that crossed Connect
// too), else its kind's: whether retrying may help, and no code.
func HintOf(err error) Hint {
	var he *hintError
	if errors.As(err, &he) {
		return he.hint
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		if h, ok := parseHint(ce.Meta().Get(hintHeader)); ok {
			return h
		}
	}
	return Hint{Retry: kindRetry[KindOf(err)]}
}

// String is the hint as hintHeader carries it: retry=true;after=2s;code=….
func (h Hint) String() string {
	var parts []string
	if h.Retry != nil {
		parts = append(parts, "retry="+strconv.FormatBool(*h.Retry))
	}
	if h.After > 0 {
		parts = append(parts, "after="+h.After.String())
	}
	if h.Code != "" {
		parts = append(parts, "code="+h.Code)
	}
	return strings.Join(parts, ";")
}

func parseHint(s string) (Hint, bool) {
	if s == "" {
		return Hint{}, false
	}
	var h Hint
	for _, part := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "retry":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Hint{}, false
			}
			h.Retry = &b
		case "after":
			d, err := time.ParseDuration(v)
			if err != nil {
				return Hint{}, false
			}
			h.After = d
		case "code":
			h.Code = v
		}
	}
	return h, true
}
