package namespaces

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/isolation/isolationtest"
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

// parentOf reads a process's parent pid from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid …: comm may hold spaces; the last ')' ends it.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
