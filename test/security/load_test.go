package security_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/network"
	cove "github.com/covesandbox/cove/sdk/go"
)

// TestLoad keeps many sandboxes alive and runs commands and file writes
// across them from many clients at once. Every command's output is the
// checksum of a token only its request carried and its exit code one the
// request chose; every file reads back with the checksum it was written
// with. Nothing may be lost or mixed up. `make test` runs a short form;
// `make test-long` the full one: 500 sandboxes, 10 000 commands, 10 000
// writes.
func TestLoad(t *testing.T) {
	sandboxes, commands, writes, netRange := 40, 800, 800, "198.19.240.0/23"
	if long() {
		sandboxes, commands, writes, netRange = 500, 10000, 10000, "198.19.224.0/20"
	}
	// 500 sandboxes of 512 MiB promise more than four times this host's memory.
	p := newCove(t, "", "--network=true", "--network-range", netRange, "--memory-overcommit", "64")
	p.prefix = network.InterfacePrefix(netip.MustParsePrefix(netRange))
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	start := time.Now()
	all := make([]*cove.Sandbox, sandboxes)
	var wg sync.WaitGroup
	errc := make(chan error, sandboxes)
	sem := make(chan struct{}, 8)
	for i := range all {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sb, err := c.Create(ctx, cove.CreateOptions{Timeout: 30 * time.Minute})
			if err != nil {
				errc <- fmt.Errorf("create %d: %w", i, err)
				return
			}
			all[i] = sb
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	t.Logf("%d sandboxes alive after %v", sandboxes, time.Since(start).Round(time.Millisecond))

	// The work: commands and writes interleaved, spread over the sandboxes,
	// 16 clients at a time.
	type op struct {
		sb    int
		write bool
		n     int
	}
	ops := make(chan op)
	go func() {
		defer close(ops)
		for i := range max(commands, writes) {
			if i < commands {
				ops <- op{sb: (i * 7) % sandboxes, n: i}
			}
			if i < writes {
				ops <- op{sb: (i * 13) % sandboxes, write: true, n: i}
			}
		}
	}()
	var (
		mu       sync.Mutex
		written  = map[string]string{} // "<sandbox index>/<path>" → checksum
		failures atomic.Int32
		done     atomic.Int32
	)
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 20 {
			t.Errorf(format, args...)
		}
	}
	start = time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range ops {
				sb := all[o.sb]
				token := randomHex(16)
				if !o.write {
					code := o.n % 4
					r, err := run(ctx, sb, "user", fmt.Sprintf("printf %%s %s | sha256sum | cut -d' ' -f1; exit %d", token, code), time.Minute)
					switch {
					case err != nil:
						fail("command %d in %s: %v", o.n, sb.ID, err)
					case r.code != code:
						fail("command %d in %s: exit %d, want %d", o.n, sb.ID, r.code, code)
					case r.out != sum(token)+"\n":
						fail("command %d in %s: printed %q, want the checksum of its own token", o.n, sb.ID, r.out)
					}
					done.Add(1)
					continue
				}
				data := []byte(strings.Repeat(token, 1+o.n%2048)) // 32 B to 64 KiB
				path := fmt.Sprintf("/home/user/w-%d", o.n)
				if err := sb.Files.WriteFile(ctx, path, data); err != nil {
					fail("write %d to %s: %v", o.n, sb.ID, err)
					continue
				}
				mu.Lock()
				written[fmt.Sprintf("%d%s", o.sb, path)] = sum(string(data))
				mu.Unlock()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d commands and %d writes in %v (%.0f operations/s)", commands, writes, elapsed.Round(time.Millisecond),
		float64(done.Load())/elapsed.Seconds())

	// Every acknowledged write reads back whole, from the sandbox it went to,
	// both through the files API and as the sandbox's processes see it.
	for key, want := range written {
		var i int
		var path string
		fmt.Sscanf(key, "%d%s", &i, &path)
		got, err := all[i].Files.ReadFile(ctx, path)
		if err != nil || sum(string(got)) != want {
			fail("read back %s from %s: %v (checksum mismatch: %v)", path, all[i].ID, err, err == nil)
		}
	}
	perSandbox := map[int]int{}
	for key := range written {
		var i int
		fmt.Sscanf(key, "%d", &i)
		perSandbox[i]++
	}
	for i, n := range perSandbox {
		r := mustRun(t, ctx, all[i], "user", "ls /home/user | grep -c '^w-'")
		if r.out != fmt.Sprintf("%d\n", n) {
			fail("%s holds %q files, want %d", all[i].ID, r.out, n)
		}
	}
	if n := failures.Load(); n > 0 {
		t.Errorf("%d operations lost or mixed up", n)
	}
	for _, sb := range all {
		if err := sb.Kill(ctx); err != nil && !errors.Is(err, cove.ErrNotFound) {
			t.Error(err)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
