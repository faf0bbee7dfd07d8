package isolationtest

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation"
)

// saveLayer changes a sandbox's files over a layer of its template (a
// file written, owned by another user, a link, a template file deleted, a
// template directory replaced), copies its writable layer while it is
// paused, and starts a second sandbox over the copy: it must see exactly
// the first one's files.
func (s *suite) saveLayer(t *testing.T) {
	t.Parallel()
	saver, ok := s.d.(isolation.LayerSaver)
	pauser, ok2 := s.d.(isolation.Pauser)
	if !ok || !ok2 {
		t.Skipf("the %s driver cannot save a sandbox's layer", s.d.Name())
	}
	lower := t.TempDir()
	if err := os.MkdirAll(lower+"/opt/d", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"opt/gone": "x", "opt/kept": "kept", "opt/d/old": "old"} {
		if err := os.WriteFile(filepath.Join(lower, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const change = "rm /opt/gone && rm -r /opt/d && mkdir /opt/d && echo new > /opt/d/new && " +
		"echo mine > /root/f && chown 1000:1000 /root/f && chmod 640 /root/f && ln -s ../root/f /opt/link && " +
		"mkdir -p /tmp/t && echo tmp > /tmp/t/x"
	const look = "ls /opt /opt/d; cat /opt/link /tmp/t/x; stat -c '%u:%g %a' /root/f"
	const want = "/opt:\nd\nkept\nlink\n\n/opt/d:\nnew\nmine\ntmp\n1000:1000 640\n"
	modes := []bool{false}
	if s.d.Capabilities().UserNamespaces {
		modes = append(modes, true)
	}
	for _, userns := range modes {
		t.Run(map[bool]string{false: "host-ids", true: "userns"}[userns], func(t *testing.T) {
			spec := s.cfg.Spec(t)
			spec.RootFS.Layers = append(append([]string(nil), spec.RootFS.Layers...), lower)
			spec.UserNamespace = userns
			id, c := s.create(t, spec)
			if res := run(t, c, change+" && "+look); string(res.Stdout) != want {
				t.Fatalf("in the first sandbox: %q %q", res.Stdout, res.Stderr)
			}
			ctx := ctxFor(t, time.Minute)
			if err := pauser.Pause(ctx, id); err != nil {
				t.Fatal(err)
			}
			saved := filepath.Join(t.TempDir(), "layer")
			err := saver.SaveLayer(ctx, id, saved)
			if rerr := pauser.Resume(context.WithoutCancel(ctx), id); rerr != nil {
				t.Fatal(rerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Lstat(saved+"/opt/gone", &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != 0 {
				t.Errorf("the deleted file is no whiteout in the copy: %+v %v", st, err)
			}
			if err := unix.Lstat(saved+"/root/f", &st); err != nil || st.Uid != 1000 || st.Gid != 1000 {
				t.Errorf("owner in the copy: %d:%d %v, want the sandbox's 1000:1000", st.Uid, st.Gid, err)
			}
			buf := make([]byte, 1)
			if n, err := unix.Lgetxattr(saved+"/opt/d", "trusted.overlay.opaque", buf); err != nil || n != 1 || buf[0] != 'y' {
				t.Errorf("the replaced directory is not opaque in the copy: %v", err)
			}
			if res := run(t, c, "cat /root/f"); string(res.Stdout) != "mine\n" {
				t.Errorf("the first sandbox after the copy: %q", res.Stdout)
			}
			spec.RootFS.Layers = append(spec.RootFS.Layers, saved)
			_, c2 := s.create(t, spec)
			if res := run(t, c2, look); string(res.Stdout) != want {
				t.Errorf("a sandbox over the copy: %q %q, want %q", res.Stdout, res.Stderr, want)
			}
		})
	}
}
