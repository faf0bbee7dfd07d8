package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/gvisor"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/node"
)

// gvisorManager starts a node whose driver is gVisor (runsc and the
// sandbox binary from the repository's bin/, which make test fills).
func (h host) gvisorManager(t *testing.T) *node.Manager {
	t.Helper()
	bin, _ := filepath.Abs("../../bin")
	runsc, agent := filepath.Join(bin, "runsc"), filepath.Join(bin, "cove-sandbox")
	if _, err := gvisor.Available(runsc); err != nil {
		t.Skipf("%v (make test installs it)", err)
	}
	if _, err := os.Stat(agent); err != nil {
		t.Skip("bin/cove-sandbox is missing: run make build")
	}
	d, err := gvisor.New(gvisor.Config{Dir: filepath.Join(h.dir, "gvisor"), CgroupParent: h.cgroupParent, Runsc: runsc, SandboxBinary: agent}, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	m, err := node.New(node.Config{Dir: filepath.Join(h.dir, "node"), MaxTimeout: time.Hour,
		DefaultLimits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 128, PIDs: 256}}, d, h.templates, logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); d.Close() })
	return m
}

// TestCloneFromAnImage: SaveLayer with memory copies a gVisor sandbox's
// processes into an image with a manifest; a sandbox created from it runs
// them on (a counter in a shell's memory goes on from the source's count)
// under its own id and token; a damaged or incomplete image is refused
// before anything starts; Release removes the image; nothing is left.
func TestCloneFromAnImage(t *testing.T) {
	h := newHost(t)
	ctx := ctxT(t)
	m := h.gvisorManager(t)
	src, err := m.Create(ctx, node.CreateRequest{Timeout: time.Minute, AccessToken: "source-token"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(id, cmd string) string {
		t.Helper()
		agent, err := m.Agent(id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := agent.Run(ctx, "root", cmd, 0)
		if err != nil {
			t.Fatalf("%s in %s: %v", cmd, id, err)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	counter := func(id string) int {
		t.Helper()
		n, err := strconv.Atoi(run(id, "sleep 0.2; cat /tmp/count"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The count lives in the shell's memory; the file only shows it.
	run(src.ID, "(n=0; while :; do n=$((n+1)); echo $n > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.05; done) >/dev/null 2>&1 &")
	counter(src.ID)
	c, err := m.SaveLayer(ctx, src.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Image == nil || len(c.Image.Files) == 0 {
		t.Fatalf("no image of the processes: %+v", c.Image)
	}
	at := counter(src.ID)
	req := node.CreateRequest{Timeout: time.Minute, Isolation: "gvisor", AccessToken: "child-token",
		BuildID: c.Info.BuildID, Template: c.Info.TemplateID, Layers: c.Info.Layers, Saved: &c.Layer, Image: c.Image}

	// Damaged, then incomplete: refused, nothing started.
	first := filepath.Join(c.Image.Dir, c.Image.Files[0].Name)
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte{data[0] ^ 0xff}, data[1:]...)
	for _, damage := range []func() error{
		func() error { return os.WriteFile(first, damaged, 0o600) },
		func() error { return os.Remove(first) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Create(ctx, req); !errs.Is(err, errs.DataLoss) {
			t.Errorf("a create from a damaged image: %v, want DataLoss", err)
		}
		if list := listOf(m); len(list) != 1 {
			t.Errorf("sandboxes after a refused create: %d, want the source only", len(list))
		}
	}
	if err := os.WriteFile(first, data, 0o600); err != nil {
		t.Fatal(err)
	}

	child, err := m.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := counter(child.ID); n < at-40 || n < 1 {
		t.Errorf("the child's counter: %d; the source's was about %d when copied (not started afresh)", n, at)
	}
	if got := run(child.ID, "echo $E2B_SANDBOX_ID; hostname"); got != child.ID+"\n"+child.ID {
		t.Errorf("the child's identity: %q", got)
	}
	// The agent took the child's token: the source's opens nothing.
	agent, _ := m.Agent(child.ID)
	agent.SetToken("source-token")
	if _, err := agent.Run(ctx, "root", "true", 0); err == nil {
		t.Error("the child's agent still takes the source's token")
	}
	agent.SetToken("child-token")
	c.Release()
	if _, err := os.Stat(c.Image.Dir); !os.IsNotExist(err) {
		t.Errorf("the image after Release: %v", err)
	}
	for _, id := range []string{child.ID, src.ID} {
		if err := m.Kill(context.Background(), id); err != nil {
			t.Error(err)
		}
	}
	if left := h.leftovers(t); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
