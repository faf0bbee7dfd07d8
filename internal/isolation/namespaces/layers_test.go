package namespaces

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/errs"
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

// TestAgentMountPointStaysInside: an image whose /.cove is a link (here
// to a host directory) or whose /.cove/cove-envd is not a file is refused,
// and nothing is made on the host through the link.
func TestAgentMountPointStaysInside(t *testing.T) {
	e := testEnv(t)
	host := t.TempDir() // what the link points at, on the host
	d := e.driver(t)
	for _, tc := range []struct {
		name  string
		layer func(dir string) error
	}{
		{"/.cove a link", func(dir string) error { return os.Symlink(host, filepath.Join(dir, ".cove")) }},
		{"/.cove a file", func(dir string) error { return os.WriteFile(filepath.Join(dir, ".cove"), nil, 0o644) }},
		{"/.cove/cove-envd a link", func(dir string) error {
			os.Mkdir(filepath.Join(dir, ".cove"), 0o755)
			return os.Symlink(filepath.Join(host, "x"), filepath.Join(dir, ".cove", "cove-envd"))
		}},
		{"/.cove/cove-envd a FIFO", func(dir string) error {
			os.Mkdir(filepath.Join(dir, ".cove"), 0o755)
			return unix.Mkfifo(filepath.Join(dir, ".cove", "cove-envd"), 0o644)
		}},
	} {
		for _, userns := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/userns=%v", tc.name, userns), func(t *testing.T) {
				layer := t.TempDir()
				if err := tc.layer(layer); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				spec := e.spec()
				spec.RootFS.Layers = append(append([]string(nil), spec.RootFS.Layers...), layer)
				spec.UserNamespace = userns
				id := isolationtest.NewID()
				_, err := d.Create(ctx, id, spec)
				defer d.Destroy(context.Background(), id)
				if !errs.Is(err, errs.InvalidArgument) || !strings.Contains(err.Error(), "/.cove") {
					t.Errorf("create: %v, want it refused", err)
				}
				if entries, _ := os.ReadDir(host); len(entries) > 0 {
					t.Errorf("made on the host through the image's link: %v", entries)
				}
			})
		}
	}
}
