package cove_test

import (
	"testing"

	cove "github.com/covesandbox/cove/sdk/go"
)

// TestTemplateStatus: an older build that serves while the newest builds
// or failed is said so; otherwise the newest build's status.
func TestTemplateStatus(t *testing.T) {
	for _, c := range []struct {
		build, serving, status, want string
	}{
		{"b1", "", "building", "building"},
		{"b1", "b1", "ready", "ready"},
		{"b2", "b1", "building", "ready (rebuilding)"},
		{"b2", "b1", "waiting", "ready (rebuilding)"},
		{"b2", "b1", "error", "ready (rebuild failed)"},
		{"b2", "", "error", "error"},
		{"b2", "b1", "ready", "ready"}, // the default tag moved back to b1
	} {
		info := cove.TemplateInfo{BuildID: c.build, ServingBuildID: c.serving, BuildStatus: c.status}
		if got := info.Status(); got != c.want {
			t.Errorf("newest %s %s, serving %q: %q, want %q", c.build, c.status, c.serving, got, c.want)
		}
	}
}
