package namespaces

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
	"github.com/covesandbox/cove/internal/testutil"
)

// hostSnapshot is what sandboxes could leave on the host.
type hostSnapshot struct {
	cgroups []string // groups under the test's cgroup parent
	files   []string // entries under the sandboxes directory
}

func snapshot(t *testing.T, e env) hostSnapshot {
	t.Helper()
	var s hostSnapshot
	s.cgroups = testutil.CgroupsUnder(e.cgroupParent)
	if entries, err := os.ReadDir(filepath.Join(e.dir, "sandboxes")); err == nil {
		for _, en := range entries {
			s.files = append(s.files, en.Name())
		}
	}
	return s
}

// TestNoLeaksAfterManyCycles creates and destroys 200 sandboxes, four at a
// time, and then finds nothing of them on the host. Other test packages
// make sandboxes at the same time, so it follows its own: their network
// namespaces and init processes, by identity.
func TestNoLeaksAfterManyCycles(t *testing.T) {
	e := testEnv(t)
	d := e.driver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const cycles, workers = 200, 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		handles []isolation.Handle
	)
	errc := make(chan error, cycles)
	jobs := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				id := isolationtest.NewID()
				h, err := d.Create(ctx, id, e.spec())
				if err != nil {
					errc <- err
					continue
				}
				mu.Lock()
				handles = append(handles, h)
				mu.Unlock()
				if err := d.Destroy(ctx, id); err != nil {
					errc <- err
				}
			}
		}()
	}
	for i := range cycles {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	after := snapshot(t, e)
	// Namespace inode numbers are reused, and other packages' sandboxes run
	// meanwhile: what must not hold a sandbox's namespace is this process
	// (the driver's handles) — its inits are checked by identity below.
	own, _ := os.Readlink("/proc/thread-self/ns/net")
	fds, _ := filepath.Glob("/proc/self/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, "net:[") && target != own {
			t.Errorf("the driver still holds a network namespace handle: %s", target)
		}
	}
	for _, h := range handles {
		if hostproc.Alive(h) {
			t.Errorf("the init of sandbox %s (pid %d) still runs", h.ID, h.PID)
		}
	}
	if len(after.cgroups) > 0 {
		t.Errorf("cgroups left: %v", after.cgroups)
	}
	if len(after.files) > 0 {
		t.Errorf("files left under the data directory: %v", after.files)
	}
	if mounted, _ := hostMountsMention(e.dir); mounted {
		t.Errorf("a mount under %s is left on the host", e.dir)
	}
}
