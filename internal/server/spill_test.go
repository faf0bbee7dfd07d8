package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestPauseToDisk: a gVisor sandbox paused with its memory is written to
// disk after --pause-to-disk-after (runsc checkpoint): no process of it
// is left, its image has a manifest, a damaged image is refused and the
// sandbox stays paused, and across a server restart connect restores it
// where it was — a counter goes on, a server in it still serves.
func TestPauseToDisk(t *testing.T) {
	runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
	if runsc == "" || agent == "" {
		t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
	}
	dataDir := t.TempDir()
	edit := func(c *server.Config) {
		c.DataDir, c.CgroupParent, c.Runsc, c.SandboxBinary = dataDir, "cove-test-"+filepath.Base(dataDir), runsc, agent
		c.PauseToDiskAfter = 50 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, stop := startStoppable(t, edit)
	code, m, raw := first.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"metadata":{"cove.isolation":"gvisor"}}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if out, err := run(ctx, first.url, id, tok, counterLoop+" (cd /tmp && python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)"); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	count := func(s srv) int { t.Helper(); return readCount(t, ctx, s, id, tok) }
	before := count(first)
	if code, _, raw := first.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{}`); code != 204 {
		t.Fatalf("pause: %d %s", code, raw)
	}
	image := filepath.Join(dataDir, "node", "saved", id)
	var files []string
	testkit.Eventually(t, time.Minute, func() error {
		rec, _ := os.ReadFile(filepath.Join(dataDir, "node", id+".json"))
		if !strings.Contains(string(rec), `"memory"`) || !strings.Contains(string(rec), `"sha256"`) { // no manifest yet
			return errors.New("the paused sandbox was not written to disk")
		}
		return nil
	})
	filepath.WalkDir(image, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Fatal("no image files")
	}
	if out, _ := exec.Command("pgrep", "-f", "runsc-sandbox.*"+id).Output(); len(out) > 0 {
		t.Errorf("a process of the sandbox on disk runs: %s", out)
	}
	// A damaged image is refused; the sandbox stays paused on disk.
	f, err := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	if code, _, raw := first.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 500 || !strings.Contains(string(raw), "damaged") {
		t.Errorf("connect with a damaged image: %d %s, want 500 damaged", code, raw)
	}
	if code, info, raw := first.do(t, "GET", "/sandboxes/"+id, keyA, ""); code != 200 || info["state"] != "paused" {
		t.Errorf("after the refusal: %d %s", code, raw)
	}
	st, _ := os.Stat(files[0])
	if err := os.Truncate(files[0], st.Size()-1); err != nil {
		t.Fatal(err)
	}
	stop()

	second := startWith(t, edit)
	if code, _, raw := second.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 201 {
		t.Fatalf("connect to restore: %d %s", code, raw)
	}
	if after := count(second); after < before || after-before > 40 {
		t.Errorf("the counter went from %d to %d across a pause to disk and a restart", before, after)
	}
	if out, err := run(ctx, second.url, id, tok, "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:8000/count\").status)'"); err != nil || out != "200\n" {
		t.Errorf("the server in the sandbox after the restore: %q %v", out, err)
	}
	if code, _, raw := second.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
		t.Errorf("kill: %d %s", code, raw)
	}
	if _, err := os.Stat(image); err == nil {
		t.Error("the image is left after the restore")
	}
	if left := testutil.Leftovers(dataDir); len(left) > 0 {
		t.Errorf("left after the kill: %v", left)
	}
}

// TestPauseToDiskInterrupted: a node that stops during a checkpoint leaves
// a record naming the image without its manifest. At the next start a
// sandbox whose checkpoint finished (no process left) is listed from its
// image and restored from it; one whose checkpoint had not begun (still
// running) is paused again, in memory. Either resumes where it was.
func TestPauseToDiskInterrupted(t *testing.T) {
	runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
	if runsc == "" || agent == "" {
		t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
	}
	dataDir := t.TempDir()
	spillAfter := 50 * time.Millisecond
	edit := func(c *server.Config) {
		c.DataDir, c.CgroupParent, c.Runsc, c.SandboxBinary = dataDir, "cove-test-i"+filepath.Base(dataDir), runsc, agent
		c.PauseToDiskAfter = spillAfter
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	record := filepath.Join(dataDir, "node")
	// editRecord rewrites a sandbox's node record as a crash would leave it.
	editRecord := func(id string, change func(map[string]any)) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(record, id+".json"))
		var m map[string]any
		if err == nil {
			err = json.Unmarshal(data, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		change(m)
		data, _ = json.Marshal(m)
		if err := os.WriteFile(filepath.Join(record, id+".json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startCounter := func(s srv) (string, string, int) {
		t.Helper()
		code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"metadata":{"cove.isolation":"gvisor"}}`)
		if code != 201 {
			t.Fatalf("create: %d %s", code, raw)
		}
		id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
		if out, err := run(ctx, s.url, id, tok, counterLoop); err != nil {
			t.Fatalf("%q %v", out, err)
		}
		return id, tok, readCount(t, ctx, s, id, tok)
	}
	resumeAndCount := func(s srv, id, tok string, before int) {
		t.Helper()
		if code, _, raw := s.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 201 {
			t.Fatalf("connect: %d %s", code, raw)
		}
		if after := readCount(t, ctx, s, id, tok); after < before || after-before > 40 {
			t.Errorf("the counter went from %d to %d", before, after)
		}
		s.do(t, "DELETE", "/sandboxes/"+id, keyA, "")
	}

	// Finished: the image is whole, the record lacks its manifest.
	first, stop := startStoppable(t, edit)
	done, doneTok, doneBefore := startCounter(first)
	if code, _, raw := first.do(t, "POST", "/sandboxes/"+done+"/pause", keyA, `{}`); code != 204 {
		t.Fatalf("pause: %d %s", code, raw)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if rec, _ := os.ReadFile(filepath.Join(record, done+".json")); strings.Contains(string(rec), `"sha256"`) {
			return nil
		}
		return errors.New("the paused sandbox was not written to disk")
	})
	stop()
	editRecord(done, func(m map[string]any) {
		rest := m["rest"].(map[string]any)
		rest["phase"] = "spilling"
		rest["memory"].(map[string]any)["files"] = nil
	})

	// Not begun: paused in memory, the record already names an image.
	spillAfter = 0
	second, stop := startStoppable(t, edit)
	resumeAndCount(second, done, doneTok, doneBefore)
	begun, begunTok, begunBefore := startCounter(second)
	if code, _, raw := second.do(t, "POST", "/sandboxes/"+begun+"/pause", keyA, `{}`); code != 204 {
		t.Fatalf("pause: %d %s", code, raw)
	}
	stop()
	editRecord(begun, func(m map[string]any) {
		// As a record written before Rest says it.
		delete(m, "rest")
		m["spilled"] = map[string]any{"dir": filepath.Join(record, "saved", begun)}
	})
	third := startWith(t, edit)
	resumeAndCount(third, begun, begunTok, begunBefore)
	if left := testutil.Leftovers(dataDir); len(left) > 0 {
		t.Errorf("left after the kills: %v", left)
	}
}

// counterLoop counts in a shell's memory, writing each count to
// /tmp/count (whole: by rename).
const counterLoop = "(n=0; while :; do n=$((n+1)); echo $n > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done) >/dev/null 2>&1 &"

// readCount reads the counter a sandbox's loop writes to /tmp/count.
func readCount(t *testing.T, ctx context.Context, s srv, id, tok string) int {
	t.Helper()
	out, err := run(ctx, s.url, id, tok, "sleep 0.3; cat /tmp/count")
	n, cerr := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || cerr != nil {
		t.Fatalf("read the counter: %q %v", out, err)
	}
	return n
}
