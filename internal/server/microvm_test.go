package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/covesandbox/cove/internal/layertar"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestMicroVMWithMemory: a microVM sandbox of an image template (no host
// directory shared into the guest) keeps its processes through a fork
// (the child's counter goes on counting) and through a pause that the
// node writes to disk (QEMU ends; after the connect the counter goes on
// from where it was); booted, and started from the template's boot
// snapshot (MicroVMBootSnapshots), whose guest's agent answers with the
// sandbox's token and variables.
func TestMicroVMWithMemory(t *testing.T) {
	agent := repoBin("cove-sandbox")
	if agent == "" {
		t.Skip("bin/cove-sandbox is missing: make test builds it")
	}
	for _, snapshots := range []bool{false, true} {
		t.Run(map[bool]string{false: "booted", true: "snapshot"}[snapshots], func(t *testing.T) {
			s := startWith(t, func(c *server.Config) {
				c.SandboxBinary, c.LocalImages, c.PauseToDiskAfter, c.MicroVMBootSnapshots = agent, true, 50*time.Millisecond, snapshots
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			code, m, raw := s.do(t, "POST", "/v3/templates", keyA, `{"name":"vm-image","isolation":"microvm"}`)
			if code != 202 && code != 201 {
				t.Fatalf("new template: %d %s", code, raw)
			}
			buildTemplate(t, s, s, m["templateID"].(string), m["buildID"].(string), `{"fromImage":"oci:`+programsImage(t)+`"}`)
			keepsMemory(t, ctx, s, `{"templateID":"vm-image","timeout":120,"envVars":{"GREETING":"hello"}}`)
			if snapshots {
				made, _ := filepath.Glob(filepath.Join(s.dataDir, "microvm", "_snapshots", "*"))
				if len(made) != 1 {
					t.Errorf("boot snapshots: %v", made)
				}
			}
		})
	}
}

// TestMicroVMBaseWithMemory is TestMicroVMWithMemory on the base
// template, whose /usr the guest sees from an image of the host's
// (MicroVMBindImages) once that is made: the first guest starts it. In
// make test-long: the image of this host's /usr takes 3.8 GB and a core
// for a minute or more, which slowed the other microVM suites of make
// test past their guards on a loaded machine.
func TestMicroVMBaseWithMemory(t *testing.T) {
	if os.Getenv("COVE_LONG") == "" {
		t.Skip("an image of the host's /usr: make test-long (COVE_LONG)")
	}
	agent := repoBin("cove-sandbox")
	if agent == "" {
		t.Skip("bin/cove-sandbox is missing: make test builds it")
	}
	s := startWith(t, func(c *server.Config) {
		c.SandboxBinary, c.MicroVMBindImages, c.PauseToDiskAfter = agent, true, 50*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	create := `{"timeout":120,"metadata":{"cove.isolation":"microvm"}}`
	// The first guest shares /usr over virtiofs while its image is made,
	// and lives as long as that may take.
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":900,"metadata":{"cove.isolation":"microvm"}}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	first := m["sandboxID"].(string)
	testutil.WaitBindImage(t, s.dataDir, 8*time.Minute)
	if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+first, keyA, ""); code != 204 {
		t.Fatalf("kill: %d %s", code, raw)
	}
	keepsMemory(t, ctx, s, create)
}

// keepsMemory creates a sandbox (the body of the create) whose loop
// counts, forks it and pauses it (written to disk at once): the child's
// and the sandbox's counters go on from where they were.
func keepsMemory(t *testing.T, ctx context.Context, s srv, create string) {
	t.Helper()
	code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, create)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	if strings.Contains(create, "GREETING") {
		if out, err := run(ctx, s.url, id, tok, `echo "$GREETING $E2B_SANDBOX_ID"; hostname`); err != nil || out != "hello "+id+"\n"+id+"\n" {
			t.Errorf("the sandbox's variables and name: %q %v", out, err)
		}
	}
	if out, err := run(ctx, s.url, id, tok, counterLoop); err != nil {
		t.Fatalf("%q %v", out, err)
	}
	// counting: the counter of a sandbox's loop is at from or past it,
	// and moves on (its process runs, with its memory). A loaded host
	// may give an emulated guest little time: it has 30 s.
	counting := func(id, tok string, from int) {
		t.Helper()
		a := readCount(t, ctx, s, id, tok)
		if a < from {
			t.Errorf("sandbox %s's counter: %d, want from %d on", id, a, from)
		}
		if !testkit.Wait(30*time.Second, func() bool { return readCount(t, ctx, s, id, tok) > a }) {
			t.Errorf("sandbox %s's counter stays at %d", id, a)
			return
		}
	}
	before := readCount(t, ctx, s, id, tok)

	code, _, raw = s.do(t, "POST", "/sandboxes/"+id+"/fork", keyA, `{"count":1,"timeout":60}`)
	var kids []struct {
		Sandbox struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal(raw, &kids); code != 201 || err != nil || len(kids) != 1 {
		t.Fatalf("fork: %d %s", code, raw)
	}
	counting(kids[0].Sandbox.SandboxID, kids[0].Sandbox.EnvdAccessToken, before)
	if out, err := run(ctx, s.url, kids[0].Sandbox.SandboxID, kids[0].Sandbox.EnvdAccessToken, "cat /etc/hostname"); err != nil || out != kids[0].Sandbox.SandboxID+"\n" {
		t.Errorf("the child's host name: %q %v", out, err)
	}
	counting(id, tok, before)

	before = readCount(t, ctx, s, id, tok)
	if code, _, raw := s.do(t, "POST", "/sandboxes/"+id+"/pause", keyA, `{}`); code != 204 {
		t.Fatalf("pause: %d %s", code, raw)
	}
	testkit.Eventually(t, time.Minute, func() error {
		rec, _ := os.ReadFile(filepath.Join(s.dataDir, "node", id+".json"))
		if strings.Contains(string(rec), `"memory"`) && strings.Contains(string(rec), `"sha256"`) { // the manifest: done
			return nil
		}
		return errors.New("the paused guest was not written to disk")
	})
	if out, _ := exec.Command("pgrep", "-f", filepath.Join(s.dataDir, "microvm", id)).Output(); len(out) > 0 {
		t.Errorf("QEMU runs for the guest on disk: %s", out)
	}
	if code, _, raw := s.do(t, "POST", "/v2/sandboxes/"+id+"/connect", keyA, `{"timeout":60}`); code != 201 {
		t.Fatalf("connect: %d %s", code, raw)
	}
	counting(id, tok, before)
}

// programsImage writes an OCI layout of one image whose one layer is a
// root of a few of the host's programs (testutil.ProgramsRoot).
func programsImage(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := layertar.Pack(&buf, testutil.ProgramsRoot(t, "bash", "dash", "cat", "sleep", "mv", "hostname"), layertar.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err == nil {
		err = p.AppendImage(img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
