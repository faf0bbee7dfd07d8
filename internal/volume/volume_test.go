package volume

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestVolumeLifecycle: a volume is a mounted, size-capped file system
// owned by the sandboxes' user; a reopened store reuses its mount (never
// a second one); names are a team's own; delete leaves nothing.
func TestVolumeLifecycle(t *testing.T) {
	testkit.NeedRoot(t, "")
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, 16, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Create(ctx, "team-a", "data")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Delete(ctx, "team-a", v.ID) // on failure: never leave a mount in a temporary directory
	if _, err := s.Create(ctx, "team-a", "data"); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("the same name twice: %v", err)
	}
	if _, err := s.Create(ctx, "team-b", "data"); err != nil {
		t.Errorf("another team's name: %v", err)
	} else if err := s.Delete(ctx, "team-b", "data"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", ".x", "a/b", strings.Repeat("a", 65)} {
		if _, err := s.Create(ctx, "team-a", bad); !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	root := s.Path(v.ID)
	if st, err := os.Stat(root); err != nil || st.Sys().(*syscall.Stat_t).Uid != UserID {
		t.Errorf("the volume's root: %v %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(root, "kept"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = os.WriteFile(filepath.Join(root, "big"), bytes.Repeat([]byte{1}, 32<<20), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("32 MiB into a 16 MiB volume: %v, want ENOSPC", err)
	}
	os.Remove(filepath.Join(root, "big"))
	again, err := Open(dir, 16, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(again.Path(v.ID), "kept")); err != nil || string(got) != "kept" {
		t.Errorf("after reopening: %q %v", got, err)
	}
	if n := strings.Count(mountinfo(t), dir); n != 1 {
		t.Errorf("%d mounts under the store after reopening it, want 1", n)
	}
	if list, err := again.List(ctx, "team-a"); err != nil || len(list) != 1 || list[0].Name != "data" {
		t.Errorf("list %+v %v", list, err)
	}
	// A cluster's replica names the volume; the node keeps that id.
	id := NewID()
	if _, err := again.CreateAs(id, "team-c", "named"); err != nil {
		t.Fatal(err)
	}
	if _, err := again.CreateAs(id, "team-d", "other"); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("an id twice: %v", err)
	}
	if _, err := again.CreateAs("../x", "team-d", "other"); !errs.Is(err, errs.InvalidArgument) {
		t.Errorf("a bad id: %v", err)
	}
	if p, err := again.Locate(id); err != nil || p != again.Path(id) {
		t.Errorf("locate: %q %v", p, err)
	}
	for range 2 { // a volume not here is no error
		if err := again.DeleteByID(id); err != nil {
			t.Error(err)
		}
	}
	if _, err := again.Locate(id); !errs.Is(err, errs.NotFound) {
		t.Errorf("locate a deleted volume: %v", err)
	}
	if err := again.Delete(ctx, "team-a", "data"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(mountinfo(t), dir) {
		t.Error("a mount is left after the delete")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 { // mnt
		t.Errorf("left after the delete: %v", entries)
	}
}

func mountinfo(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVolumeBounds: a team keeps at most MaxPerTeam volumes and the node
// MaxTotal; a refused create leaves nothing; another team is not held
// back by one at its bound.
func TestVolumeBounds(t *testing.T) {
	testkit.NeedRoot(t, "")
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, 16, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	s.MaxPerTeam, s.MaxTotal = 2, 3
	var made []Volume
	defer func() {
		for _, v := range made {
			s.DeleteByID(v.ID)
		}
	}()
	for _, tc := range []struct {
		team, name string
		kind       errs.Kind // Internal: made
	}{
		{"team-a", "one", errs.Internal},
		{"team-a", "two", errs.Internal},
		{"team-a", "three", errs.QuotaExceeded},
		{"team-b", "one", errs.Internal},
		{"team-b", "two", errs.ResourceExhausted},
	} {
		v, err := s.Create(ctx, tc.team, tc.name)
		switch {
		case tc.kind == errs.Internal && err != nil:
			t.Fatalf("%s/%s: %v", tc.team, tc.name, err)
		case tc.kind == errs.Internal:
			made = append(made, v)
		case !errs.Is(err, tc.kind):
			t.Errorf("%s/%s: %v, want %v", tc.team, tc.name, err, tc.kind)
		}
	}
	entries, _ := os.ReadDir(dir)
	if got := len(entries); got != 1+2*len(made) { // mnt, and a record and an image each
		t.Errorf("the store holds %d entries for %d volumes", got, len(made))
	}
}
