package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// TestPauseSurvivesRestart: a sandbox paused with its memory stays paused
// across a server restart (frozen, not running, listed as paused) and a
// connect to the new server resumes it where it was (201), on each driver.
func TestPauseSurvivesRestart(t *testing.T) {
	for _, isolation := range []string{"namespaces", "gvisor", "microvm"} {
		t.Run(isolation, func(t *testing.T) {
			runsc, agent := repoBin("runsc"), repoBin("cove-sandbox")
			if isolation != "namespaces" && (runsc == "" || agent == "") {
				t.Skip("bin/runsc or bin/cove-sandbox is missing: make test builds them")
			}
			dataDir := t.TempDir()
			edit := func(c *server.Config) {
				c.DataDir, c.CgroupParent, c.Runsc, c.SandboxBinary = dataDir, "cove-test-"+filepath.Base(dataDir), runsc, agent
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			first, stop := startStoppable(t, edit)
			code, m, raw := first.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120,"metadata":{"cove.isolation":"`+isolation+`"}}`)
			if code != 201 {
				t.Fatalf("create: %d %s", code, raw)
			}
			id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
			if _, err := run(ctx, first.url, id, tok, counterLoop); err != nil {
				t.Fatal(err)
			}
			count := func(s srv) int { t.Helper(); return readCount(t, ctx, s, id, tok) }
			before := count(first)
			if code, _, raw := first.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{"memory":true}`); code != 204 {
				t.Fatalf("pause: %d %s", code, raw)
			}
			stop()
			time.Sleep(time.Second) // 20 counts, were it not frozen

			second := startWith(t, edit)
			if code, info, raw := second.do(t, "GET", "/sandboxes/"+id, keyA, ""); code != 200 || info["state"] != "paused" {
				t.Fatalf("after the restart: %d %s", code, raw)
			}
			if code, _, raw := second.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 201 {
				t.Fatalf("connect to resume: %d %s", code, raw)
			}
			if after := count(second); after < before || after-before > 30 {
				t.Errorf("the counter went from %d to %d across a pause of over a second and a restart", before, after)
			}
			if code, _, raw := second.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
				t.Errorf("kill: %d %s", code, raw)
			}
			if left := testutil.Leftovers(dataDir); len(left) > 0 {
				t.Errorf("left after the kill: %v", left)
			}
		})
	}
}

// TestPauseCycles pauses and resumes a sandbox again and again (10 times,
// 100 with COVE_LONG set) while a process in it counts and writes files:
// the counter never goes back and moves on after each resume, files
// written before a pause read back byte for byte after it, and a server
// listening in the sandbox answers through the proxy after each resume.
func TestPauseCycles(t *testing.T) {
	cycles := 10
	if os.Getenv("COVE_LONG") != "" {
		cycles = 100
	}
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":600}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	defer s.do(t, "DELETE", "/sandboxes/"+id, keyA, "")
	if _, err := run(ctx, s.url, id, tok, "(n=0; while :; do n=$((n+1)); echo $n > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.01; done) >/dev/null 2>&1 & "+
		"(cd /tmp && python3 -m http.server 8090 --bind 127.0.0.1) >/dev/null 2>&1 &"); err != nil {
		t.Fatal(err)
	}
	get := func(cmd string) string {
		t.Helper()
		out, err := run(ctx, s.url, id, tok, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return strings.TrimSpace(out)
	}
	serves := func() bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/count", nil)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", "8090")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		if !serves() {
			return errors.New("the sandbox's server did not start")
		}
		return nil
	})
	last := 0
	for i := range cycles {
		file := "/tmp/data-" + strconv.Itoa(i)
		sum := get("head -c 1048576 /dev/urandom > " + file + " && sha256sum " + file + " | cut -c1-64")
		before, _ := strconv.Atoi(get("cat /tmp/count"))
		if before < last {
			t.Fatalf("cycle %d: the counter went back from %d to %d", i, last, before)
		}
		if code, _, raw := s.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{}`); code != 204 {
			t.Fatalf("cycle %d: pause: %d %s", i, code, raw)
		}
		if serves() {
			t.Fatalf("cycle %d: a paused sandbox's server answered", i)
		}
		if code, _, raw := s.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":600}`); code != 201 {
			t.Fatalf("cycle %d: connect: %d %s", i, code, raw)
		}
		if got := get("sha256sum " + file + " | cut -c1-64"); got != sum {
			t.Fatalf("cycle %d: %s changed across the pause", i, file)
		}
		// It moves on (polled: on a loaded machine the thawed loop may
		// wait a while for a CPU).
		after := before
		testkit.Eventually(t, 20*time.Second, func() error {
			if after, _ = strconv.Atoi(get("cat /tmp/count")); after <= before {
				return fmt.Errorf("cycle %d: the counter did not move on after the resume (%d, then %d)", i, before, after)
			}
			return nil
		})
		if !serves() {
			t.Fatalf("cycle %d: the sandbox's server does not answer after the resume", i)
		}
		last = after
	}
}

// TestPauseWithoutMemory: a sandbox paused without its memory keeps its
// files and nothing else (no process of it runs, on the host either), and
// survives a server restart; connect boots it again with the same token.
func TestPauseWithoutMemory(t *testing.T) {
	dataDir := t.TempDir()
	edit := func(c *server.Config) { c.DataDir, c.CgroupParent = dataDir, "cove-test-"+filepath.Base(dataDir) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, stop := startStoppable(t, edit)
	code, m, raw := first.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	// A sleep no other test's sandbox runs (pgrep sees the whole host).
	sleep := fmt.Sprintf("sleep 1000.%d", time.Now().UnixNano()%1000000)
	if out, err := run(ctx, first.url, id, tok, "echo kept > ~/state; ("+sleep+" >/dev/null 2>&1 &)"); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	if code, _, raw := first.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{"memory":false}`); code != 204 {
		t.Fatalf("pause: %d %s", code, raw)
	}
	if out, _ := exec.Command("pgrep", "-f", sleep).Output(); len(out) > 0 {
		t.Errorf("a process of the paused sandbox runs: %s", out)
	}
	// Its saved files serve a snapshot and a fork as they are.
	code, snap, raw := first.do(t, "POST", "/sandboxes/"+id+"/snapshots", keyA, `{}`)
	if code != 201 {
		t.Fatalf("snapshot of the paused sandbox: %d %s", code, raw)
	}
	for _, body := range []string{`{"templateID":"` + snap["snapshotID"].(string) + `","timeout":60}`} {
		code, c, raw := first.do(t, "POST", "/v2/sandboxes", keyA, body)
		if code != 201 {
			t.Fatalf("create from the snapshot: %d %s", code, raw)
		}
		if out, err := run(ctx, first.url, c["sandboxID"].(string), c["envdAccessToken"].(string), "cat ~/state"); err != nil || out != "kept\n" {
			t.Errorf("from the snapshot: %q %v", out, err)
		}
		first.do(t, "DELETE", "/sandboxes/"+c["sandboxID"].(string), keyA, "")
	}
	code, _, raw = first.do(t, "POST", "/sandboxes/"+id+"/fork", keyA, `{"count":1,"timeout":60}`)
	var kids []struct {
		Sandbox struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal(raw, &kids); code != 201 || err != nil || len(kids) != 1 || kids[0].Sandbox.SandboxID == "" {
		t.Fatalf("fork of the paused sandbox: %d %s", code, raw)
	}
	if out, err := run(ctx, first.url, kids[0].Sandbox.SandboxID, kids[0].Sandbox.EnvdAccessToken, "cat ~/state"); err != nil || out != "kept\n" {
		t.Errorf("in the fork: %q %v", out, err)
	}
	first.do(t, "DELETE", "/sandboxes/"+kids[0].Sandbox.SandboxID, keyA, "")
	stop()
	second := startWith(t, edit)
	if code, info, raw := second.do(t, "GET", "/sandboxes/"+id, keyA, ""); code != 200 || info["state"] != "paused" {
		t.Fatalf("after the restart: %d %s", code, raw)
	}
	if code, _, raw := second.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 201 {
		t.Fatalf("connect to boot it again: %d %s", code, raw)
	}
	if out, err := run(ctx, second.url, id, tok, "cat ~/state; pgrep -x sleep || echo none"); err != nil || out != "kept\nnone\n" {
		t.Errorf("after the boot: %q %v", out, err)
	}
	if code, _, raw := second.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != 204 {
		t.Errorf("kill: %d %s", code, raw)
	}
	if left := testutil.Leftovers(dataDir); len(left) > 0 {
		t.Errorf("left after the kill: %v", left)
	}
}

// TestPauseWithoutMemoryCycles pauses a sandbox without its memory and
// boots it again, again and again (10 times, 100 with COVE_LONG), each
// time after adding, changing and deleting files: the tree is byte for
// byte what it was, a deleted file stays deleted, and the sandbox stacks
// one saved layer, not one per pause.
func TestPauseWithoutMemoryCycles(t *testing.T) {
	cycles := 10
	if os.Getenv("COVE_LONG") != "" {
		cycles = 100
	}
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":600}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	defer s.do(t, "DELETE", "/sandboxes/"+id, keyA, "")
	get := func(cmd string) string {
		t.Helper()
		out, err := run(ctx, s.url, id, tok, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return strings.TrimSpace(out)
	}
	layers := func() int {
		t.Helper()
		var rec struct{ Layers []string }
		data, err := os.ReadFile(filepath.Join(s.dataDir, "node", id+".json"))
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(rec.Layers)
	}
	const tree = "cd ~/d && find . -type f | sort | xargs sha256sum | sha256sum | cut -c1-64"
	get("mkdir -p ~/d")
	stacked := 0
	for i := range cycles {
		sum := get(fmt.Sprintf("cd ~/d && head -c 262144 /dev/urandom > new-%d && echo %d >> changed && rm -f new-%d && ", i, i, i-2) + tree)
		if code, _, raw := s.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{"memory":false}`); code != 204 {
			t.Fatalf("cycle %d: pause: %d %s", i, code, raw)
		}
		if code, _, raw := s.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":600}`); code != 201 {
			t.Fatalf("cycle %d: connect: %d %s", i, code, raw)
		}
		if got := get(tree); got != sum {
			t.Fatalf("cycle %d: the files changed across the pause", i)
		}
		if i >= 2 && get(fmt.Sprintf("test -e ~/d/new-%d && echo back || echo gone", i-2)) != "gone" {
			t.Fatalf("cycle %d: a deleted file came back", i)
		}
		if n := layers(); i == 0 {
			stacked = n
		} else if n != stacked {
			t.Fatalf("cycle %d: the sandbox stacks %d layers, %d after the first pause", i, n, stacked)
		}
	}
}
