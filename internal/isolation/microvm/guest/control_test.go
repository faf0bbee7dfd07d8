package guest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestOutcome reads back what writeOutcome wrote: nothing for success, the
// guest's message otherwise, and ErrUnknownRequest for the answer an init
// gives to a request it does not know (an older guest's, to RequestSeed).
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		failure error
		unknown bool
	}{
		{nil, false},
		{errors.New("eth0's address: exists"), false},
		{fmt.Errorf(unknownRequest+"%q", RequestSeed), true},
		{fmt.Errorf("no request %q", 'X'), true}, // as inits before RequestSeed wrote it
	} {
		var buf bytes.Buffer
		if err := writeOutcome(&buf, tc.failure); err != nil {
			t.Fatal(err)
		}
		err := readOutcome(&buf)
		if (err == nil) != (tc.failure == nil) || errors.Is(err, ErrUnknownRequest) != tc.unknown {
			t.Errorf("outcome of %v read back as %v", tc.failure, err)
		}
	}
}
