package microvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestBindImages gives guests a read-only bind of a host directory as an
// image of it (BindImages): the first guest shares the directory over
// virtiofs while the image is made, and cannot be saved; the next sees
// the image, with the directory's files, owners, modes and links, and is
// checkpointed and restored with its processes. A change to the
// directory makes a new image, which new guests see; the old one stays
// while a guest records it and is removed after. A guest that does not
// see the current image is outdated.
func TestBindImages(t *testing.T) {
	cfg, _ := testDriver(t)
	cfg.BindImages, cfg.BindRecheck = true, time.Millisecond
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() }) // after the guests' destroys
	src := t.TempDir()
	write := func(name, data string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("tool", "v1\n", 0o755)
	if err := os.Mkdir(filepath.Join(src, "private"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(src, "private"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tool", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	spec := isolation.Spec{
		RootFS: isolation.RootFS{Layers: []string{testutil.ProgramsRoot(t, "bash", "cat", "sleep", "stat", "readlink")},
			Binds: []isolation.Bind{{Source: src, Target: "/opt/shared"}}},
		Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 128, DiskMB: 64, PIDs: 64},
	}
	look := "cat /opt/shared/tool; stat -c '%u:%g %a' /opt/shared/private; readlink /opt/shared/link; " +
		"echo x > /opt/shared/new 2>/dev/null || echo read-only"

	// The first guest: virtiofs, not saved.
	first := isolationtest.NewID()
	c := createGuest(t, ctx, d, first, spec)
	if n := len(d.get(first).vm.fsds); n != 1 {
		t.Errorf("the first guest has %d virtiofsds, want 1 (its image is being made)", n)
	}
	if err := d.Checkpoint(ctx, first, t.TempDir()); !errs.Is(err, errs.Unimplemented) {
		t.Errorf("checkpoint of a guest sharing a directory over virtiofs: %v", err)
	}
	want := "v1\n1000:1000 750\ntool\nread-only\n"
	if res, err := c.Run(ctx, "root", look, time.Minute); err != nil || string(res.Stdout) != want {
		t.Errorf("the shared directory over virtiofs: %q %q %v, want %q", res.Stdout, res.Stderr, err, want)
	}

	// The next, once the image is made: a disk, saved and restored.
	v1 := waitBindImage(t, d, src, "")
	if st, err := os.Stat(v1); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the image: %v %v", st, err)
	}
	second := isolationtest.NewID()
	c2 := createGuest(t, ctx, d, second, spec)
	if vm := d.get(second).vm; len(vm.fsds) != 0 {
		t.Errorf("a guest after the image was made has %d virtiofsds", len(vm.fsds))
	}
	if res, err := c2.Run(ctx, "root", look, time.Minute); err != nil || string(res.Stdout) != want {
		t.Errorf("the shared directory from its image: %q %q %v, want %q", res.Stdout, res.Stderr, err, want)
	}
	// The first guest is outdated now (a warm one is not handed out).
	if !d.Outdated(first) || d.Outdated(second) {
		t.Errorf("outdated: the guest on virtiofs %v, the guest on the image %v; want true, false", d.Outdated(first), d.Outdated(second))
	}
	startLoop(t, ctx, c2, "true")
	x, before := loopState(t, ctx, c2)
	saved := t.TempDir()
	if err := d.Checkpoint(ctx, second, saved); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Restore(ctx, second, saved, nil); err != nil {
		t.Fatal(err)
	}
	if y, after := loopState(t, ctx, c2); y != x || after < before {
		t.Errorf("the loop before the checkpoint: %s %d; after the restore: %s %d", x, before, y, after)
	}
	if res, err := c2.Run(ctx, "root", "cat /opt/shared/tool", time.Minute); err != nil || string(res.Stdout) != "v1\n" {
		t.Errorf("the shared directory after the restore: %q %v", res.Stdout, err)
	}
	if d.Outdated(second) {
		t.Error("the restored guest, on the current image, is outdated")
	}

	// The host's directory changes: a new image for new guests; the old
	// one stays while the second guest records it.
	write("tool", "v2\n", 0o755)
	v2 := waitBindImage(t, d, src, v1)
	if _, err := os.Stat(v1); err != nil {
		t.Errorf("the image a running guest records was removed: %v", err)
	}
	third := isolationtest.NewID()
	c3 := createGuest(t, ctx, d, third, spec)
	if res, err := c3.Run(ctx, "root", "cat /opt/shared/tool", time.Minute); err != nil || string(res.Stdout) != "v2\n" {
		t.Errorf("a guest after the directory changed: %q %v", res.Stdout, err)
	}
	if sh := d.get(third).vm; len(sh.fsds) != 0 {
		t.Errorf("the third guest has %d virtiofsds", len(sh.fsds))
	}
	if !d.Outdated(second) || d.Outdated(third) {
		t.Errorf("outdated: the guest on the old image %v, the guest on the new %v; want true, false", d.Outdated(second), d.Outdated(third))
	}
	// A copy of the second guest's processes (a snapshot's), then the
	// guest gone: its image is removed, and the copy is refused clearly.
	copied := t.TempDir()
	if err := d.Image(ctx, second, copied); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(ctx, second); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		waitBindImage(t, d, src, "") // a check, which prunes
		if _, err := os.Stat(v1); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return errors.New("the old image stays with no guest recording it")
	})
	if _, err := os.Stat(v2); err != nil {
		t.Errorf("the current image: %v", err)
	}
	clone := isolationtest.NewID()
	if _, err := d.Clone(ctx, clone, spec, copied); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "changed") {
		t.Errorf("a copy of a guest whose image is gone: %v", err)
	}
	if left := leaks(d.cfg.Dir, clone); len(left) > 0 {
		t.Errorf("a refused clone left %v", left)
	}
	// Records that name anything but an image of the node's own.
	for _, forged := range [][]HostShare{
		{{Source: "/", Target: "/host", Writable: true}},
		{{Source: src, Target: "/opt/shared"}},
		{{Source: src, Target: "/opt/shared", Image: "/etc/shadow"}},
	} {
		if err := checkSavedShares(filepath.Dir(v1), forged); !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("a saved guest's record sharing %+v: %v", forged, err)
		}
	}
}

// waitBindImage waits until the driver has an image of source other than
// old, and returns it (10 minutes at most: the host's /usr takes one or
// two on a loaded machine).
func waitBindImage(t *testing.T, d *Driver, source, old string) string {
	t.Helper()
	var img string
	testkit.Eventually(t, 10*time.Minute, func() error {
		d.binds.use.RLock()
		img = d.binds.image(source)
		d.binds.use.RUnlock()
		if img == "" || img == old {
			return fmt.Errorf("no new image of %s", source)
		}
		return nil
	})
	return img
}
