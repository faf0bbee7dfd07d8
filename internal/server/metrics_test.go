package server_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestMetricsWindow: a sandbox's use is sampled into a history kept for
// it; GET /sandboxes/{id}/metrics?start=&end= returns exactly the samples
// inside the window (inclusive, unix seconds), none for a window before
// the sandbox existed.
func TestMetricsWindow(t *testing.T) {
	s := startWith(t, func(c *server.Config) { c.MetricsInterval = 100 * time.Millisecond })
	id := s.create(t, keyA)["sandboxID"].(string)
	type sample struct {
		TimestampUnix int64 `json:"timestampUnix"`
		MemTotal      int64 `json:"memTotal"`
		CPUCount      int   `json:"cpuCount"`
	}
	get := func(query string) []sample {
		t.Helper()
		code, _, raw := s.do(t, "GET", "/sandboxes/"+id+"/metrics"+query, keyA, "")
		var out []sample
		if code != 200 || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("metrics%s: %d %s", query, code, raw)
		}
		return out
	}
	// Wait for samples spread over four whole seconds at least: windows
	// end before the last one, which may still get samples.
	var all []sample
	testkit.Eventually(t, 30*time.Second, func() error {
		all = get("")
		if len(all) > 0 && all[len(all)-1].TimestampUnix-all[0].TimestampUnix >= 3 {
			return nil
		}
		return fmt.Errorf("samples after 30 s: %+v", all)
	})
	for i, m := range all {
		if m.MemTotal <= 0 || m.CPUCount < 1 || (i > 0 && m.TimestampUnix < all[i-1].TimestampUnix) {
			t.Fatalf("sample %d of %+v", i, all)
		}
	}
	first, last := all[0].TimestampUnix, all[len(all)-1].TimestampUnix-1
	mid := first + 1
	count := func(from, to int64) (n int) {
		for _, m := range all {
			if m.TimestampUnix >= from && m.TimestampUnix <= to {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		query    string
		from, to int64
		wantNone bool
	}{
		{"one second", fmt.Sprintf("?start=%d&end=%d", mid, mid), mid, mid, false},
		{"from the middle on", fmt.Sprintf("?start=%d&end=%d", mid, last), mid, last, false},
		{"up to the middle", fmt.Sprintf("?start=%d&end=%d", first, mid), first, mid, false},
		{"before the sandbox", fmt.Sprintf("?start=%d&end=%d", first-100, first-1), 0, 0, true},
	} {
		got := get(tc.query)
		if tc.wantNone {
			if len(got) != 0 {
				t.Errorf("%s: %d samples, want none", tc.name, len(got))
			}
			continue
		}
		if len(got) != count(tc.from, tc.to) {
			t.Errorf("%s: %d samples, want the %d taken in [%d, %d]", tc.name, len(got), count(tc.from, tc.to), tc.from, tc.to)
		}
		for _, m := range got {
			if m.TimestampUnix < tc.from || m.TimestampUnix > tc.to {
				t.Errorf("%s: a sample at %d", tc.name, m.TimestampUnix)
			}
		}
	}
}

// TestTeamMetrics: GET /teams/{teamID}/metrics answers the caller's team's
// concurrent sandboxes and start rate over time, and /metrics/max the
// largest; another team's is 404.
func TestTeamMetrics(t *testing.T) {
	s := startWith(t, func(c *server.Config) { c.MetricsInterval = 100 * time.Millisecond })
	type sample struct {
		TimestampUnix       int64   `json:"timestampUnix"`
		ConcurrentSandboxes int     `json:"concurrentSandboxes"`
		SandboxStartRate    float64 `json:"sandboxStartRate"`
	}
	// until polls the team's samples until the last has want sandboxes.
	until := func(want int) []sample {
		t.Helper()
		var all []sample
		testkit.Eventually(t, 30*time.Second, func() error {
			code, _, raw := s.do(t, "GET", "/teams/default/metrics", keyA, "")
			if all = nil; code != 200 || json.Unmarshal(raw, &all) != nil {
				t.Fatalf("team metrics: %d %s", code, raw)
			}
			if len(all) > 0 && all[len(all)-1].ConcurrentSandboxes == want {
				return nil
			}
			return fmt.Errorf("team metrics: %+v, want %d running", all, want)
		})
		return all
	}
	s.create(t, keyA)
	before := len(until(1))
	s.create(t, keyA) // after a sample: its start is in a later one
	all := until(2)
	started := 0 // the samples that counted a start (the exact count: TestTeamMetricsSample)
	for _, m := range all[before:] {
		if m.SandboxStartRate > 0 {
			started++
		}
	}
	if started != 1 {
		t.Errorf("samples with a start after the first sample: %d, want 1: %+v", started, all[before:])
	}
	code, m, raw := s.do(t, "GET", "/teams/default/metrics/max?metric=concurrent_sandboxes", keyA, "")
	if code != 200 || m["value"].(float64) != 2 {
		t.Errorf("max concurrent: %d %s", code, raw)
	}
	for _, tc := range []struct {
		path, key string
		want      int
	}{
		{"/teams/default/metrics", keyB, 404},
		{"/teams/other/metrics", keyA, 404},
		{"/teams/default/metrics/max?metric=nope", keyA, 400},
		{"/teams/default/metrics?start=20&end=10", keyA, 400},
	} {
		if code, _, raw := s.do(t, "GET", tc.path, tc.key, ""); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.path, code, raw, tc.want)
		}
	}
}
