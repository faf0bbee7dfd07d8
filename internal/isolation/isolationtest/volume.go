package isolationtest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/isolation"
)

// volume binds a host directory read-write (a volume) at a path the
// template lacks: the sandbox's user writes there, the host sees the file
// with the sandbox's ids (in a user namespace too), and nothing else of
// the host is reachable through it.
func (s *suite) volume(t *testing.T) {
	t.Parallel()
	modes := []bool{false}
	if s.d.Capabilities().UserNamespaces {
		modes = append(modes, true)
	}
	for _, userns := range modes {
		t.Run(map[bool]string{false: "host-ids", true: "userns"}[userns], func(t *testing.T) {
			vol := t.TempDir()
			if err := os.Chown(vol, 1000, 1000); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(vol, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(vol, "from-host"), []byte("host\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := s.cfg.Spec(t)
			spec.UserNamespace = userns
			spec.RootFS.Binds = append(append([]isolation.Bind(nil), spec.RootFS.Binds...), isolation.Bind{Source: vol, Target: "/mnt/shared/vol", Writable: true})
			_, c := s.create(t, spec)
			res, err := c.Run(ctxFor(t, time.Minute), "user", "cat /mnt/shared/vol/from-host && echo mine > /mnt/shared/vol/f && stat -c '%u:%g' /mnt/shared/vol/f && grep ' /mnt/shared/vol ' /proc/self/mounts", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.Stdout); len(got) < 15 || got[:15] != "host\n1000:1000\n" {
				t.Fatalf("in the sandbox: %q %q", got, res.Stderr)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(vol, "f"), &st); err != nil || st.Uid != 1000 || st.Gid != 1000 {
				t.Errorf("on the host: %+v %v, want 1000:1000", st, err)
			}
		})
	}
}
