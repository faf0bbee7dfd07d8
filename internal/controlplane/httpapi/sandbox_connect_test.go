package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
)

// TestOnResume: a connect's onResume (E2B 2.66) as a string or an object;
// a size in it is refused, naming it.
func TestOnResume(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw, action, refused string
	}{
		{`"reboot"`, "reboot", ""},
		{`"restore"`, "restore", ""},
		{`{"action":"reboot"}`, "reboot", ""},
		{`{}`, "restore", ""},
		{`{"action":"restore","memoryMB":null}`, "restore", ""},
		{`{"action":"restore","memoryMB":1024}`, "", "onResume.memoryMB is not supported"},
		{`{"action":"reboot","cpuCount":2}`, "", "onResume.cpuCount is not supported"},
		{`"hibernate"`, "", "onResume action"},
		{`42`, "", "onResume: want"},
	} {
		action, err := onResume(json.RawMessage(c.raw))
		switch {
		case c.refused == "" && (err != nil || action != c.action):
			t.Errorf("%s: %q %v, want %q", c.raw, action, err, c.action)
		case c.refused != "" && (!errs.Is(err, errs.InvalidArgument) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s: %v, want a 400 saying %q", c.raw, err, c.refused)
		}
	}
}
