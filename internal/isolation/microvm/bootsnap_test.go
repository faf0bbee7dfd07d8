package microvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestBootSnapshots starts two guests of one template and limits at once
// from one boot snapshot (BootSnapshots): each runs on the snapshot's memory file,
// mapped copy-on-write, under its own name, token and variables, with
// files of its own; the file stays as saved while they use and free
// memory; the snapshot's guest and cgroup are gone once it is made, and
// its token opens no guest; evicted, its guests run on; one is
// checkpointed and restored, and forked, as booted guests are.
func TestBootSnapshots(t *testing.T) {
	cfg, _ := testDriver(t)
	cfg.BootSnapshots = true
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	root := testutil.ProgramsRoot(t, "bash", "cat", "sleep", "head", "od", "hostname", "grep", "rm")
	spec := func(id string) isolation.Spec {
		return isolation.Spec{
			RootFS: isolation.RootFS{Layers: []string{root}},
			Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 64, PIDs: 64},
			Env:    map[string]string{"E2B_SANDBOX_ID": id},
			Agent:  isolation.AgentSettings{AccessToken: "token-" + id, EnvVars: map[string]string{"GREETING": "hi " + id}},
		}
	}
	ids := []string{isolationtest.NewID(), isolationtest.NewID()}
	random := map[string]string{}
	clients := map[string]*agentclient.Client{}
	// Both at once: the second waits for the snapshot the first makes.
	created := make(chan error, len(ids))
	start := time.Now()
	for _, id := range ids {
		go func() {
			_, err := d.Create(ctx, id, spec(id))
			created <- err
		}()
	}
	for range ids {
		if err := <-created; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("two creates at once in %v", time.Since(start).Round(time.Millisecond))
	for i, id := range ids {
		c := guestAgent(t, d, id)
		clients[id] = c
		c.SetToken("token-" + id)
		res, err := c.Run(ctx, "root", `hostname; echo "$E2B_SANDBOX_ID $GREETING"; head -c 16 /dev/urandom | od -An -tx1; echo mine > /tmp/file-`+id+`; cat /tmp/file-*`, time.Minute)
		want := id + "\n" + id + " hi " + id + "\n"
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), want) || !strings.HasSuffix(string(res.Stdout), "\nmine\n") {
			t.Fatalf("guest %d: %v %+v %q %q, want it to start with %q and see its own file alone", i, err, res, res.Stdout, res.Stderr, want)
		}
		random[id] = strings.Split(string(res.Stdout), "\n")[2]
		// Its memory is the snapshot's file, copy-on-write.
		maps, err := os.ReadFile("/proc/" + fmt.Sprint(d.get(id).vm.qemu.h.PID) + "/maps")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(maps), filepath.Join(cfg.Dir, snapshotsDir)) {
			t.Errorf("guest %d's QEMU does not map the snapshot's memory", i)
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(cfg.Dir, snapshotsDir, "*"))
	if len(snaps) != 1 || strings.HasSuffix(snaps[0], ".tmp") {
		t.Fatalf("snapshots after two creates of one template: %v", snaps)
	}
	// The snapshot's memory stays as saved however its guests use theirs
	// (freed pages they hand back included): checked at the end.
	memory := fileSum(t, filepath.Join(snaps[0], snapshotMemory))
	for _, c := range clients { // memory used and freed
		if res, err := c.Run(ctx, "root", "head -c 64000000 /dev/urandom > /dev/shm/big && rm /dev/shm/big && sleep 4", time.Minute); err != nil || res.ExitCode != 0 {
			t.Errorf("a burst of memory: %v %+v", err, res)
		}
	}
	if now := fileSum(t, filepath.Join(snaps[0], snapshotMemory)); now != memory {
		t.Errorf("the snapshot's memory changed while guests ran on it")
	}
	if random[ids[0]] == random[ids[1]] {
		t.Errorf("two guests of one snapshot read the same random bytes: %s", random[ids[0]])
	}
	if left := leaks(cfg.Dir, "_snapshot-"+filepath.Base(snaps[0])); len(left) > 0 {
		t.Errorf("the snapshot's guest left %v", left)
	}
	// The snapshot's token opens no guest's agent.
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, ids[0], agentPort) })
	defer c.Close()
	c.SetToken(readToken(t, snaps[0]))
	if _, err := c.Run(ctx, "root", "true", time.Minute); err == nil {
		t.Error("the snapshot's token runs a command in a guest started from it")
	}

	// Evicted, the snapshot's files go; its guests keep its memory mapped.
	d.snapMu.Lock()
	err = d.evictSnapshots(0)
	d.snapMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snaps[0]); !os.IsNotExist(err) {
		t.Errorf("an evicted snapshot: %v", err)
	}
	if res, err := clients[ids[1]].Run(ctx, "root", "cat /tmp/file-"+ids[1], time.Minute); err != nil || string(res.Stdout) != "mine\n" {
		t.Errorf("a guest after its snapshot was evicted: %q %v", res.Stdout, err)
	}

	// Saved whole and restored; copied with its processes.
	a := clients[ids[0]]
	startLoop(t, ctx, a, "true")
	x, before := loopState(t, ctx, a)
	saved := t.TempDir()
	if err := d.Checkpoint(ctx, ids[0], saved); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Restore(ctx, ids[0], saved, nil); err != nil {
		t.Fatal(err)
	}
	if y, after := loopState(t, ctx, a); y != x || after < before {
		t.Errorf("the loop before the checkpoint: %s %d; after the restore: %s %d", x, before, y, after)
	}
	copied := t.TempDir()
	if err := d.Image(ctx, ids[0], copied); err != nil {
		t.Fatal(err)
	}
	child := isolationtest.NewID()
	if _, err := d.Clone(ctx, child, spec(child), copied); err != nil {
		t.Fatal(err)
	}
	b := guestAgent(t, d, child)
	b.SetToken("token-" + ids[0]) // a copy keeps its source's token until the node's reidentify
	if y, n := loopState(t, ctx, b); y != x || n < before {
		t.Errorf("the copy's loop: %s %d, its source's %s %d", y, n, x, before)
	}
}

// readToken reads a boot snapshot's agent token.
func readToken(t *testing.T, snap string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(snap, snapshotToken))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fileSum is the SHA-256 of a file's bytes.
func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
