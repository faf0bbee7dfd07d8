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
