package server_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/server"
)

// TestDataDirInUse: a second server on a data directory another one uses
// is refused at once, naming the first one's pid.
func TestDataDirInUse(t *testing.T) {
	s := start(t)
	err := server.Run(context.Background(), server.Config{Listen: "127.0.0.1:0", DataDir: s.dataDir, Domain: "localhost",
		CgroupParent: "cove-test-second", APIKeys: []string{keyA}, Out: io.Discard}, logx.Discard())
	if err == nil || !strings.Contains(err.Error(), "in use by another cove server (pid ") {
		t.Errorf("a second server on %s: %v", s.dataDir, err)
	}
}

func TestDefaultDomain(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:3000": "localhost:3000",
		"[::]:8080":      "localhost:8080",
		"0.0.0.0:80":     "localhost",
		"nonsense":       "localhost",
	} {
		if got := server.DefaultDomain(addr); got != want {
			t.Errorf("DefaultDomain(%q) = %q, want %q", addr, got, want)
		}
	}
}
