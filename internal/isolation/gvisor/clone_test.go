package gvisor

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
)

// TestClone copies a running sandbox whole into two new ones: each goes on
// from the source's processes (a web server's in-memory counter), then
// counts on its own; each has the source's files and its own hostname;
// the source goes on unchanged; nothing is left after Destroy.
func TestClone(t *testing.T) {
	e := testEnv(t)
	d := e.driver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := isolationtest.NewID()
	if _, err := d.Create(ctx, id, e.spec()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	defer func() {
		for _, id := range append(ids, id) {
			if err := d.Destroy(context.Background(), id); err != nil {
				t.Error(err)
			}
			if left := e.leaks(t, id); len(left) > 0 {
				t.Errorf("left of %s: %v", id, left)
			}
		}
	}()
	run := func(id, cmd string) string {
		t.Helper()
		c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
		defer c.Close()
		res, err := c.Run(ctx, "root", cmd, 0)
		if err != nil {
			t.Fatalf("%s in %s: %v", cmd, id, err)
		}
		return string(res.Stdout)
	}
	run(id, "echo kept > /tmp/file; (setsid python3 -c '"+counterServer+"' >/dev/null 2>&1 &)")
	if a, b := count(t, ctx, d, id), count(t, ctx, d, id); a != "1" || b != "2" {
		t.Fatalf("counter before the copy: %q %q", a, b)
	}
	// As the node does: paused, its files copied, its processes imaged.
	if err := d.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(t.TempDir(), "layer")
	if err := d.SaveLayer(ctx, id, layer); err != nil {
		t.Fatal(err)
	}
	image := t.TempDir()
	if err := d.Image(ctx, id, image); err != nil {
		t.Fatal(err)
	}
	if err := d.Resume(ctx, id); err != nil {
		t.Fatalf("the source after its image: %v", err)
	}
	for range 2 {
		child := isolationtest.NewID()
		spec := e.spec()
		spec.RootFS.Layers = append(append([]string(nil), spec.RootFS.Layers...), layer)
		if _, err := d.Clone(ctx, child, spec, image); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, child)
		if a, b := count(t, ctx, d, child), count(t, ctx, d, child); a != "3" || b != "4" {
			t.Errorf("a copy's counter: %q %q, want 3 4 (the source's memory, then its own)", a, b)
		}
		if got, want := run(child, "cat /tmp/file; hostname; cat /etc/hostname"), "kept\n"+child+"\n"+child+"\n"; got != want {
			t.Errorf("a copy's file and hostname: %q, want %q", got, want)
		}
	}
	if got := count(t, ctx, d, id); got != "3" {
		t.Errorf("the source's counter after two copies: %q, want 3", got)
	}
	if got := strings.TrimSpace(run(id, "hostname")); got != id {
		t.Errorf("the source's hostname: %q", got)
	}
}
