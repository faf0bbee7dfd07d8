package microvm

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestStaticBinary: the driver takes a static guest init (make build's
// cove-sandbox) and refuses, saying why, one a guest cannot run.
func TestStaticBinary(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	sandbox := filepath.Join(filepath.Dir(file), "../../../bin/cove-sandbox")
	for _, tc := range []struct {
		name, path, want string
	}{
		{"make build's", sandbox, ""},
		{"dynamically linked", "/bin/true", "is dynamically linked"},
		{"missing", "/nonexistent/cove-sandbox", "the guests' init /nonexistent/cove-sandbox"},
		{"not a program", "/etc/hostname", "the guests' init /etc/hostname"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := staticBinary(tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
