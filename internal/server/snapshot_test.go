package server_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestSnapshotIntegrity damages a snapshot's saved layer on disk in each
// way a disk or a person can — a byte changed, a file gone, a file added,
// a mode changed, the layer gone — and asks for a sandbox from it: each
// is refused with the reason and leaves nothing, and the layer restored
// serves again.
func TestSnapshotIntegrity(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if out, err := run(ctx, s.url, id, tok, "mkdir -p ~/d && echo precious > ~/d/data && echo other > ~/other"); err != nil {
		t.Fatalf("write: %q %v", out, err)
	}
	code, snap, raw := s.do(t, "POST", "/sandboxes/"+id+"/snapshots", keyA, `{}`)
	if code != 201 {
		t.Fatalf("snapshot: %d %s", code, raw)
	}
	snapshotID := snap["snapshotID"].(string)
	templateID, _, _ := strings.Cut(snapshotID, ":")
	var rec struct {
		Builds []struct {
			Snapshot struct {
				Layer struct{ Name string }
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(s.dataDir, "templates", "templates", templateID+".json"))
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil || len(rec.Builds) != 1 {
		t.Fatalf("the snapshot's record: %v %s", err, data)
	}
	layer := filepath.Join(s.dataDir, "templates", "layers", rec.Builds[0].Snapshot.Layer.Name)
	pristine := filepath.Join(t.TempDir(), "pristine")
	if out, err := exec.Command("cp", "-a", layer, pristine).CombinedOutput(); err != nil {
		t.Fatalf("keep a copy: %v %s", err, out)
	}
	restore := func() {
		t.Helper()
		if err := os.RemoveAll(layer); err != nil { // a plain directory tree: no mounts in it
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", pristine, layer).CombinedOutput(); err != nil {
			t.Fatalf("restore: %v %s", err, out)
		}
	}
	create := func() (int, map[string]any, []byte) {
		return s.do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"`+snapshotID+`","timeout":60}`)
	}
	for _, tc := range []struct {
		name, why string
		damage    func() error
	}{
		{"a byte changed", "damaged", func() error { return os.WriteFile(layer+"/home/user/d/data", []byte("prediuos\n"), 0o644) }},
		{"a file gone", "damaged", func() error { return os.Remove(layer + "/home/user/other") }},
		{"a file added", "damaged", func() error { return os.WriteFile(layer+"/home/user/extra", nil, 0o644) }},
		{"a mode changed", "damaged", func() error { return os.Chmod(layer+"/home/user/d/data", 0o666) }},
		{"the layer gone", "cannot be read", func() error { return os.RemoveAll(layer) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.damage(); err != nil {
				t.Fatal(err)
			}
			defer restore()
			code, _, raw := create()
			if code != 500 || !strings.Contains(string(raw), tc.why) {
				t.Errorf("create from the damaged snapshot: %d %s, want 500 %q", code, raw, tc.why)
			}
			code, _, raw = s.do(t, "GET", "/v2/sandboxes", keyA, "")
			if code != 200 || strings.Count(string(raw), `"sandboxID"`) != 1 {
				t.Errorf("sandboxes after the refusal: %d %s, want the source alone", code, raw)
			}
		})
	}
	code, m, raw = create()
	if code != 201 {
		t.Fatalf("create from the restored snapshot: %d %s", code, raw)
	}
	if out, err := run(ctx, s.url, m["sandboxID"].(string), m["envdAccessToken"].(string), "cat ~/d/data"); err != nil || out != "precious\n" {
		t.Errorf("the snapshot's file: %q %v", out, err)
	}
	for _, sb := range []string{id, m["sandboxID"].(string)} {
		if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+sb, keyA, ""); code != 204 {
			t.Errorf("kill: %d %s", code, raw)
		}
	}
	if left := testutil.Leftovers(s.dataDir); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// TestSnapshotOfProcesses: a snapshot of a gVisor sandbox keeps its
// processes (an image with a manifest, in the template store): a sandbox
// created from it runs them on — a counter in a shell's memory goes on
// from the snapshot's count — a damaged image is refused and leaves
// nothing, and deleting the snapshot removes the image.
func TestSnapshotOfProcesses(t *testing.T) {
	runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
	if runsc == "" || agent == "" {
		t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
	}
	s := startWith(t, func(c *server.Config) { c.Runsc, c.SandboxBinary = runsc, agent })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"metadata":{"cove.isolation":"gvisor"}}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if out, err := run(ctx, s.url, id, tok, counterLoop); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	count := func(id, tok string) int { t.Helper(); return readCount(t, ctx, s, id, tok) }
	count(id, tok)
	code, snap, raw := s.do(t, "POST", "/sandboxes/"+id+"/snapshots", keyA, `{}`)
	if code != 201 {
		t.Fatalf("snapshot: %d %s", code, raw)
	}
	at := count(id, tok)
	snapshotID := snap["snapshotID"].(string)
	templateID, _, _ := strings.Cut(snapshotID, ":")
	var rec struct {
		Builds []struct {
			Snapshot struct {
				Image *struct {
					Name  string
					Files []struct{ Name string }
				}
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(s.dataDir, "templates", "templates", templateID+".json"))
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil || len(rec.Builds) != 1 || rec.Builds[0].Snapshot.Image == nil || len(rec.Builds[0].Snapshot.Image.Files) == 0 {
		t.Fatalf("the snapshot's record names no image of its processes: %v %s", err, data)
	}
	image := filepath.Join(s.dataDir, "templates", "images", rec.Builds[0].Snapshot.Image.Name)
	file := filepath.Join(image, rec.Builds[0].Snapshot.Image.Files[0].Name)
	create := func() (int, map[string]any, []byte) {
		return s.do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"`+snapshotID+`","timeout":60}`)
	}

	// A byte added: refused, nothing started; taken away: it serves.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	if code, _, raw := create(); code != 500 || !strings.Contains(string(raw), "damaged") {
		t.Errorf("create from a damaged image: %d %s, want 500 damaged", code, raw)
	}
	if code, _, raw := s.do(t, "GET", "/v2/sandboxes", keyA, ""); code != 200 || strings.Count(string(raw), `"sandboxID"`) != 1 {
		t.Errorf("sandboxes after the refusal: %d %s, want the source alone", code, raw)
	}
	st, _ := os.Stat(file)
	if err := os.Truncate(file, st.Size()-1); err != nil {
		t.Fatal(err)
	}

	code, m, raw = create()
	if code != 201 {
		t.Fatalf("create from the snapshot: %d %s", code, raw)
	}
	child, childTok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	first := count(child, childTok)
	if first < 1 || first > at+40 {
		t.Errorf("the copy's counter starts at %d; the source's was %d just after the snapshot", first, at)
	}
	if next := count(child, childTok); next <= first {
		t.Errorf("the copy's counter does not run on: %d then %d", first, next)
	}
	for _, sb := range []string{id, child} {
		if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+sb, keyA, ""); code != 204 {
			t.Errorf("kill: %d %s", code, raw)
		}
	}
	if code, _, raw := s.do(t, "DELETE", "/templates/"+templateID, keyA, ""); code != 204 {
		t.Fatalf("delete the snapshot: %d %s", code, raw)
	}
	if _, err := os.Stat(image); !os.IsNotExist(err) {
		t.Errorf("the snapshot's image after its delete: %v", err)
	}
	if left := testutil.Leftovers(s.dataDir); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}
