package namespaces

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
)

// TestImageLayers stacks two image-style layers over the base template: the
// upper one deletes a file of the lower (a whiteout) and hides a
// directory's contents (an opaque directory). Both must hold in and out of
// a user namespace (where layers are id-mapped mounts).
func TestImageLayers(t *testing.T) {
	e := testEnv(t)
	dir := t.TempDir()
	lower, upper := filepath.Join(dir, "lower"), filepath.Join(dir, "upper")
	for _, p := range []string{lower + "/opt/d", upper + "/opt/d"} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(lower+"/opt/gone", []byte("x"), 0o644)
	os.WriteFile(lower+"/opt/kept", []byte("kept"), 0o644)
	os.WriteFile(lower+"/opt/d/old", []byte("old"), 0o644)
	os.WriteFile(upper+"/opt/d/new", []byte("new"), 0o644)
	if err := unix.Mknod(upper+"/opt/gone", unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	// Both forms, as the template store marks opaque directories: a user
	// namespace's overlay reads the user.* one.
	for _, x := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		if err := unix.Setxattr(upper+"/opt/d", x, []byte("y"), 0); err != nil {
			t.Fatal(err)
		}
	}
	d := e.driver(t)
	for _, userns := range []bool{false, true} {
		t.Run(map[bool]string{false: "host-ids", true: "userns"}[userns], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			spec := e.spec()
			spec.RootFS.Layers = append(append([]string(nil), spec.RootFS.Layers...), lower, upper)
			spec.UserNamespace = userns
			id := isolationtest.NewID()
			if _, err := d.Create(ctx, id, spec); err != nil {
				t.Fatal(err)
			}
			defer d.Destroy(context.Background(), id)
			c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
			defer c.Close()
			res, err := c.Run(ctx, "root", "ls /opt /opt/d; cat /opt/kept", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(res.Stdout), "/opt:\nd\nkept\n\n/opt/d:\nnew\nkept"; got != want {
				t.Errorf("got %q (%s), want %q", got, res.Stderr, want)
			}
		})
	}
}
