package namespaces

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestSpawner: the sandboxes' inits are the node's children, cloned by
// the spawner; a spawner that died is replaced at the next create, and
// one that is closed leaves its sandboxes running.
func TestSpawner(t *testing.T) {
	e := testEnv(t)
	bin := binaries()["sandbox-binary"]
	if bin == "" {
		bin = binaries()["release-binary"]
	}
	d := e.driverWith(t, bin)
	d.cfg.UserNamespaces = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := func() string {
		t.Helper()
		id := isolationtest.NewID()
		h, err := d.Create(ctx, id, e.spec())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := d.Destroy(context.Background(), id); err != nil {
				t.Error(err)
			}
		})
		if ppid := parentOf(t, h.PID); ppid != os.Getpid() {
			t.Errorf("the init's parent is %d, not this process (%d)", ppid, os.Getpid())
		}
		return id
	}
	create()
	d.spawner.mu.Lock()
	spawnerPID := d.spawner.cmd.Process.Pid
	if err := d.spawner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d.spawner.mu.Unlock()
	// Dead before the next create: a spawner killed while it reads a
	// request may have served it, and that create fails by design.
	testkit.Eventually(t, 10*time.Second, func() error {
		if state, ok := stateOf(spawnerPID); ok && state != "Z" {
			return fmt.Errorf("the killed spawner %d is still %s", spawnerPID, state)
		}
		return nil
	})
	create()
	d.spawner.mu.Lock()
	if d.spawner.cmd == nil || d.spawner.cmd.Process.Pid == spawnerPID {
		t.Error("no new spawner after the first died")
	}
	d.spawner.mu.Unlock()
	id := create()
	d.spawner.Close()
	if _, err := os.Stat("/proc/" + strconv.Itoa(d.get(id).handle.PID)); err != nil {
		t.Errorf("a sandbox ended with its spawner: %v", err)
	}
	create() // a closed spawner starts again at the next create
}

// statFields are the fields of a process's /proc stat after its command
// (state, ppid, …), and whether it has one.
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	// pid (comm) state ppid …: comm may hold spaces; the last ')' ends it.
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])), true
}

// stateOf is a process's state (R, S, Z …), and whether it exists.
func stateOf(pid int) (string, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) == 0 {
		return "", false
	}
	return f[0], true
}

// parentOf reads a process's parent pid from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	f, ok := statFields(pid)
	if !ok || len(f) < 2 {
		t.Fatalf("process %d has no stat", pid)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
