package isolation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
)

func TestLinkLeadsOut(t *testing.T) {
	root := t.TempDir()
	for name, target := range map[string]string{
		"out-absolute": "/usr",
		"out-relative": "../../..",
		"in-relative":  "real",
		"in-dangling":  "missing",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tests := []struct {
		name string
		out  bool
	}{
		{"out-absolute", true},
		{"out-relative", true},
		{"in-relative", false},
		{"in-dangling", false},
		{"real", false},
		{"absent", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := LinkLeadsOut(r, tc.name)
			if !tc.out {
				if err != nil {
					t.Fatalf("LinkLeadsOut: %v, want nil", err)
				}
				return
			}
			if !errs.Is(err, errs.InvalidArgument) || !strings.Contains(err.Error(), "leads out of its root") {
				t.Fatalf("LinkLeadsOut: %v, want an invalid-argument error naming the link", err)
			}
		})
	}
}
