package envd_test

import (
	"net/url"
	"os"
	"testing"
)

// TestDownloadPseudoFile: a file that tells no size (/proc, /sys) is read
// whole, as E2B's agent reads it (E2B's own suite compares boot ids read
// through files.read): it was sent empty, and under gVisor failed to seek.
func TestDownloadPseudoFile(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	const path = "/proc/sys/kernel/random/boot_id"
	want, err := os.ReadFile(path)
	if err != nil || len(want) == 0 {
		t.Fatalf("read %s here: %q %v", path, want, err)
	}
	for _, enc := range []string{"identity", "gzip"} {
		resp, body := a.get(t, "/files?path="+url.QueryEscape(path), "Accept-Encoding", enc)
		if resp.StatusCode != 200 || string(body) != string(want) {
			t.Errorf("GET %s (%s): %d %q, want %q", path, enc, resp.StatusCode, body, want)
		}
	}
	empty := t.TempDir() + "/empty"
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if resp, body := a.get(t, "/files?path="+url.QueryEscape(empty)); resp.StatusCode != 200 || len(body) != 0 {
		t.Errorf("an empty file: %d %q", resp.StatusCode, body)
	}
}
