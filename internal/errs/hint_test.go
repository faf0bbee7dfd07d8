package errs

import (
	"fmt"
	"testing"
	"time"
)

// TestHintOf: a hint marked, one that crossed Connect (as a node's
// refusal reaches the API in a cluster), and each kind's default.
func TestHintOf(t *testing.T) {
	full := Retryable(New(Unavailable, "node is full"), 2*time.Second, CodeCapacity)
	for _, c := range []struct {
		name string
		err  error
		want string // Hint.String
	}{
		{"marked", full, "retry=true;after=2s;code=sandbox_capacity_unavailable"},
		{"wrapped", fmt.Errorf("create: %w", full), "retry=true;after=2s;code=sandbox_capacity_unavailable"},
		{"across Connect", fmt.Errorf("node n1: %w", ConnectError(full)), "retry=true;after=2s;code=sandbox_capacity_unavailable"},
		{"final", Final(New(Unavailable, "no such driver"), CodeNoCompatibleNode), "retry=false;code=sandbox_no_compatible_node"},
		{"a bad request", New(InvalidArgument, "bad"), "retry=false"},
		{"a stored quota", New(QuotaExceeded, "storage"), "retry=false"},
		{"unavailable, unknown", New(Unavailable, "down"), ""},
		{"internal, unknown", fmt.Errorf("boom"), ""},
	} {
		if got := HintOf(c.err).String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if k := KindOf(ConnectError(full)); k != Unavailable {
		t.Errorf("a hinted error's kind across Connect: %v", k)
	}
}
