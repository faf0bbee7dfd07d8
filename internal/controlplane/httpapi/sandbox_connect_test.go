package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
)

// TestDecodeResume: a connect's or resume's body as E2B's SDKs send it:
// onResume (2.66) as a string or an object with the sizes to resume with,
// those sizes beside it (the connect's memoryMB and cpuCount, the
// deprecated resume's cpuCount), memory false as a reboot; what
// contradicts itself or passes E2B's bounds is refused, naming the field.
func TestDecodeResume(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body    string
		reboot  bool
		size    isolation.Limits
		refused string
	}{
		{body: `{}`},
		{body: `{"onResume":"reboot"}`, reboot: true},
		{body: `{"onResume":"restore"}`},
		{body: `{"onResume":{"action":"reboot"}}`, reboot: true},
		{body: `{"onResume":{}}`},
		{body: `{"memory":false}`, reboot: true},
		{body: `{"onResume":{"action":"restore","memoryMB":null}}`},
		{body: `{"onResume":{"action":"restore","memoryMB":1024,"cpuCount":3}}`, size: isolation.Limits{CPUMillis: 3000, MemoryMB: 1024}},
		{body: `{"onResume":{"action":"reboot","cpuCount":2}}`, reboot: true, size: isolation.Limits{CPUMillis: 2000}},
		{body: `{"onResume":{"memoryMB":256}}`, size: isolation.Limits{MemoryMB: 256}},
		{body: `{"memoryMB":768,"cpuCount":1}`, size: isolation.Limits{CPUMillis: 1000, MemoryMB: 768}},
		{body: `{"cpuCount":4,"onResume":{"action":"restore","cpuCount":4}}`, size: isolation.Limits{CPUMillis: 4000}},
		{body: `{"cpuCount":2,"onResume":{"action":"restore","cpuCount":4}}`, refused: "cpuCount 2 contradicts onResume.cpuCount 4"},
		{body: `{"onResume":{"action":"restore","memoryMB":64}}`, refused: "memoryMB must be 128 to 65536"},
		{body: `{"onResume":{"action":"restore","cpuCount":0}}`, refused: "cpuCount must be 1 to 64"},
		{body: `{"onResume":{"action":"restore","memoryMB":"1G"}}`, refused: "onResume: want"},
		{body: `{"memory":true,"onResume":"reboot"}`, refused: "memory true contradicts onResume"},
		{body: `{"onResume":"hibernate"}`, refused: "onResume action"},
		{body: `{"onResume":42}`, refused: "onResume: want"},
		{body: `{"autoPause":true}`, refused: "autoPause is not supported"},
	} {
		r := httptest.NewRequest("POST", "/sandboxes/x/connect", strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/json")
		ask, err := decodeResume(httptest.NewRecorder(), r)
		switch {
		case c.refused == "" && (err != nil || ask.reboot != c.reboot || ask.size != c.size):
			t.Errorf("%s: reboot %t, size %+v (%v); want reboot %t, size %+v", c.body, ask.reboot, ask.size, err, c.reboot, c.size)
		case c.refused != "" && (!errs.Is(err, errs.InvalidArgument) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s: %v, want a 400 saying %q", c.body, err, c.refused)
		}
	}
}
