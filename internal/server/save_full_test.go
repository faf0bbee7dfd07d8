package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/server"
)

// TestSaveOnAFullDisk: a pause without memory, a snapshot and a fork that
// meet a full data disk fail with 507, leave the sandbox running as it
// was and nothing half-written; with room again the pause saves the
// sandbox's files byte for byte.
func TestSaveOnAFullDisk(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", data, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=96m,mode=700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(data, unix.MNT_DETACH) }) // after the server stops (cleanups run last first)
	s := startWith(t, func(c *server.Config) { c.DataDir = data })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	sum, err := run(ctx, s.url, id, tok, "head -c 40M /dev/urandom > ~/big && sha256sum ~/big")
	if err != nil || len(sum) < 64 {
		t.Fatalf("write: %q %v", sum, err)
	}
	// Leave 8 MiB: less than the 40 MiB the sandbox wrote.
	var st unix.Statfs_t
	if err := unix.Statfs(data, &st); err != nil {
		t.Fatal(err)
	}
	filler, err := os.Create(filepath.Join(data, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(filler.Fd()), 0, 0, int64(st.Bavail)*st.Bsize-8<<20); err != nil {
		t.Fatal(err)
	}
	filler.Close()
	for _, op := range []struct{ path, body string }{
		{"/sandboxes/" + id + "/pause", `{"memory":false}`},
		{"/sandboxes/" + id + "/snapshots", `{}`},
		{"/sandboxes/" + id + "/fork", `{"count":1}`},
	} {
		if code, _, raw := s.do(t, "POST", op.path, keyA, op.body); code != 507 {
			t.Errorf("POST %s on a full disk: %d %s, want 507", op.path, code, raw)
		}
		if code, info, raw := s.do(t, "GET", "/sandboxes/"+id, keyA, ""); code != 200 || info["state"] != "running" {
			t.Errorf("after POST %s: %d %s, want it running", op.path, code, raw)
		}
		if out, err := run(ctx, s.url, id, tok, "sha256sum ~/big"); err != nil || out != sum {
			t.Errorf("after POST %s the sandbox answers %q %v", op.path, out, err)
		}
		if stages, _ := filepath.Glob(filepath.Join(data, "templates", "layers", ".stage-*")); len(stages) > 0 {
			t.Errorf("after POST %s: half-written copies %v", op.path, stages)
		}
	}
	if err := os.Remove(filepath.Join(data, "filler")); err != nil {
		t.Fatal(err)
	}
	if code, _, raw := s.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{"memory":false}`); code != 204 {
		t.Fatalf("pause with room: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 201 {
		t.Fatalf("resume: %d %s", code, raw)
	}
	if out, err := run(ctx, s.url, id, tok, "sha256sum ~/big"); err != nil || out != sum {
		t.Errorf("after the pause without memory: %q %v, want %q", out, err, sum)
	}
}
