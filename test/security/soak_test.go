package security_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// TestSoak churns sandboxes (create, a command, a file, kill) from several
// clients and checks that the server gives back what it took: its open
// files and goroutines return to where they were, and nothing of the
// sandboxes is left (cleanup). 15 s in `make test`, 5 min in `make test-long`.
func TestSoak(t *testing.T) {
	d := 15 * time.Second
	if long() {
		d = 5 * time.Minute
	}
	debug := testutil.FreeAddr(t)
	const netRange = "198.19.242.0/24"
	p := newCove(t, "", "--network=true", "--network-range", netRange, "--debug-listen", debug)
	p.prefix = network.InterfacePrefix(netip.MustParsePrefix(netRange))
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()

	cycle := func() error {
		sb, err := c.Create(ctx, cove.CreateOptions{Timeout: 5 * time.Minute})
		if err != nil {
			return err
		}
		defer sb.Kill(ctx)
		if r, err := sb.Commands.Run(ctx, "echo soak"); err != nil || r.Stdout != "soak\n" {
			return fmt.Errorf("command: %q %v", r.Stdout, err)
		}
		return sb.Files.WriteFile(ctx, "/tmp/f", []byte("soak"))
	}
	for range 8 { // warm up: pools, connections, caches
		if err := cycle(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	pid := p.cmd.Process.Pid
	fds0, g0, rss0 := openFiles(t, pid), goroutines(t, debug), rss(t, pid)

	var cycles, failed atomic.Int32
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if err := cycle(); err != nil {
					if failed.Add(1) <= 5 {
						t.Errorf("cycle: %v", err)
					}
					continue
				}
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	// Settle: background teardown, pool refills, idle connections.
	var fds1, g1 int
	testkit.Wait(30*time.Second, func() bool {
		fds1, g1 = openFiles(t, pid), goroutines(t, debug)
		return fds1 <= fds0+16 && g1 <= g0+32
	})
	rss1 := rss(t, pid)
	t.Logf("%d cycles in %v: open files %d → %d, goroutines %d → %d, RSS %.1f → %.1f MiB",
		cycles.Load(), d, fds0, fds1, g0, g1, float64(rss0)/(1<<20), float64(rss1)/(1<<20))
	if fds1 > fds0+16 {
		t.Errorf("the server's open files grew from %d to %d", fds0, fds1)
	}
	if g1 > g0+32 {
		t.Errorf("the server's goroutines grew from %d to %d", g0, g1)
	}
}

func openFiles(t *testing.T, pid int) int {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func rss(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// goroutines reads the server's goroutine count from its pprof endpoint.
func goroutines(t *testing.T, debug string) int {
	resp, err := http.Get("http://" + debug + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	// "goroutine profile: total N"
	f := strings.Fields(strings.SplitN(string(line), "\n", 2)[0])
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Fatalf("goroutine profile: %q", line)
	}
	return n
}
