package microvm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestPruneImages: a driver's start removes the layer images whose layer
// is gone or unknown and what an interrupted make left, and keeps the
// others.
func TestPruneImages(t *testing.T) {
	cfg, _ := testDriver(t)
	images := filepath.Join(cfg.Dir, imagesDir)
	if err := os.MkdirAll(images, 0o700); err != nil {
		t.Fatal(err)
	}
	kept := t.TempDir()
	for name, content := range map[string]string{
		"kept.erofs": "", "kept.erofs.layer": kept,
		"gone.erofs": "", "gone.erofs.layer": filepath.Join(kept, "nope"),
		"unknown.erofs": "", "cut.erofs.tmp": "",
	} {
		if err := os.WriteFile(filepath.Join(images, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewDriver(cfg); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(images)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"kept.erofs", "kept.erofs.layer"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}

// TestManyLayers boots a root of more layers than a guest takes disks:
// its lowest layers share one image, their merged tree, and the guest
// sees every layer's files, a file a layer deleted (a whiteout) gone,
// whether the deletion is in the merged image or above it; the merge
// leaves no mount behind.
func TestManyLayers(t *testing.T) {
	cfg, _ := testDriver(t)
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	layers := []string{testutil.ProgramsRoot(t, "bash", "ls")}
	var want []string
	n := virtioTransports - fixedDevices + 3
	for i := 1; i < n; i++ {
		l := t.TempDir()
		if err := os.MkdirAll(filepath.Join(l, "layers"), 0o755); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("f%02d", i)
		if err := os.WriteFile(filepath.Join(l, "layers", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
		// Layers 4 (merged) and n-2 (its own disk) delete their
		// predecessor's file.
		if i == 4 || i == n-2 {
			gone := fmt.Sprintf("f%02d", i-1)
			if err := unix.Mknod(filepath.Join(l, "layers", gone), unix.S_IFCHR, 0); err != nil {
				t.Fatal(err)
			}
			want = slices.DeleteFunc(want, func(s string) bool { return s == gone })
		}
		layers = append(layers, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := isolationtest.NewID()
	spec := isolation.Spec{RootFS: isolation.RootFS{Layers: layers}, Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 128, DiskMB: 64, PIDs: 64}}
	c := createGuest(t, ctx, d, id, spec)
	if rec, err := readRecordFile(filepath.Join(d.dir(id), recordFile)); err != nil || len(rec.Layers) != virtioTransports-fixedDevices {
		t.Errorf("%d layers on %d disks (%v), want %d", len(layers), len(rec.Layers), err, virtioTransports-fixedDevices)
	}
	res, err := c.Run(ctx, "root", "ls /layers", time.Minute)
	if got := strings.Fields(string(res.Stdout)); err != nil || !slices.Equal(got, want) {
		t.Errorf("the layers' files: %v %q %q, want %v", err, res.Stdout, res.Stderr, want)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), filepath.Join(cfg.Dir, imagesDir)) {
		t.Error("a merge's mount is left")
	}
}

// TestLowPriority: a background image's mkfs.erofs runs at nice 19 in the
// idle I/O class.
func TestLowPriority(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if err := lowPriority(pid); err != nil {
		t.Fatal(err)
	}
	// getpriority's raw value is 20 - nice.
	if prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid); err != nil || 20-prio != 19 {
		t.Errorf("nice %d (%v), want 19", 20-prio, err)
	}
	const ioprioGet, whoProcess = unix.SYS_IOPRIO_GET, 1
	v, _, e := unix.Syscall(ioprioGet, whoProcess, uintptr(pid), 0)
	if e != 0 || v>>13 != 3 {
		t.Errorf("I/O class %d (%v), want 3 (idle)", v>>13, e)
	}
}
