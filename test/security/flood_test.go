package security_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// floodLimit is the flooded server's descriptor limit: its budget keeps a
// reserve of 256 for the API and shares the other 256.
const floodLimit = 512

// TestUnauthenticatedFlood: clients without any credential, from
// 127.0.0.2 and 127.0.0.3, hold more idle connections than the server has
// descriptors (reconnecting as it closes them) while a client with an API
// key, from 127.0.0.1, creates, runs, lists and kills sandboxes. The key's
// client is served throughout; the flood holds no more than the cap per
// address and the budget's shared part allow; the server's descriptors
// stay under its limit and no accept fails; once the flood leaves, the
// port serves and the descriptors fall back. (The server used to stop
// accepting at its first EMFILE, closing the port for good, while each
// idle connection waited 30 s for its first byte.)
func TestUnauthenticatedFlood(t *testing.T) {
	p := prepareCove(t, "", "--pool-size=1", "--unauthenticated-per-address=200")
	p.nofile = floodLimit
	p.start()
	pid := p.cmd.Process.Pid
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	legit(t, ctx, p.srv.URL)
	before := descriptors(t, pid)
	t.Logf("before the flood: %s", threadsAndMemory(t, pid))

	flooding, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var opened atomic.Int64
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		for range floodLimit + 100 {
			wg.Add(1)
			go func() { defer wg.Done(); holdIdle(flooding, src, p.srv.Addr, &opened) }()
		}
	}
	defer func() { stop(); wg.Wait() }()

	// The flood fills what it may: the budget's shared part, 200 of it
	// from 127.0.0.2.
	var h healthAnswer
	testkit.Eventually(t, time.Minute, func() error {
		h = health(t, p.srv.URL)
		if h.Descriptors.Shared == 0 || h.Unauthenticated.Held < h.Descriptors.Shared-8 || h.Unauthenticated.Refused == 0 {
			return fmt.Errorf("the flood holds %d (%d refused) of %d shared descriptors", h.Unauthenticated.Held, h.Unauthenticated.Refused, h.Descriptors.Shared)
		}
		return nil
	})
	if h.Descriptors.Shared+h.Descriptors.Reserve != floodLimit {
		t.Errorf("the server's budget: %+v, want a limit of %d", h.Descriptors, floodLimit)
	}
	check := func(when string) {
		t.Helper()
		h := health(t, p.srv.URL)
		if h.Code != 200 || h.Unauthenticated.Held > h.Descriptors.Shared || h.Descriptors.InUse > h.Descriptors.Shared {
			t.Errorf("%s: health %+v", when, h)
		}
		for _, l := range h.Listeners {
			if !l.Accepting || l.AcceptErrors != 0 {
				t.Errorf("%s: listener %+v", when, l)
			}
		}
		if n := descriptors(t, pid); n >= floodLimit {
			t.Errorf("%s: the server holds %d descriptors of %d", when, n, floodLimit)
		}
	}
	check("flood held")
	t.Logf("the flood: %+v; the server holds %d descriptors (%d before), %s", h, descriptors(t, pid), before, threadsAndMemory(t, pid))
	// The key's client, from another address, is served meanwhile, on new
	// connections each time (the flood's oldest make room for them).
	for i := range 3 {
		legit(t, ctx, p.srv.URL)
		check("served " + strconv.Itoa(i+1) + " times")
	}
	if h := health(t, p.srv.URL); h.Unauthenticated.Evicted == 0 {
		t.Errorf("no flood connection made room for the key's client's: %+v", h)
	}
	if opened.Load() <= int64(2*(floodLimit+100)) {
		t.Errorf("the flood opened %d connections: it did not reconnect as the server closed them", opened.Load())
	}

	// The flood leaves: the port serves, the descriptors fall back.
	stop()
	wg.Wait()
	testkit.Eventually(t, time.Minute, func() error {
		if h := health(t, p.srv.URL); h.Unauthenticated.Held > 1 || h.Descriptors.InUse > 1 {
			return fmt.Errorf("after the flood: %+v", h)
		}
		if n := descriptors(t, pid); n > before+16 {
			return fmt.Errorf("the server holds %d descriptors, %d before the flood", n, before)
		}
		return nil
	})
	legit(t, ctx, p.srv.URL)
	t.Logf("%d flood connections opened; after it: %+v; the server holds %d descriptors, %s", opened.Load(), health(t, p.srv.URL), descriptors(t, pid), threadsAndMemory(t, pid))
}

// holdIdle keeps a connection from src to addr open and silent until ctx
// ends, opening another (after a pause) each time the server closes it.
func holdIdle(ctx context.Context, src, addr string, opened *atomic.Int64) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			opened.Add(1)
			stop := context.AfterFunc(ctx, func() { c.Close() })
			_, _ = io.Copy(io.Discard, c) // until the server closes it
			stop()
			c.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// legit is what a client with the API key does, on connections of its
// own from 127.0.0.1: create, run, list, kill.
func legit(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := cove.NewClient(cove.WithAPIURL(url), cove.WithSandboxURL(url), cove.WithAPIKey(apiKey), cove.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Create(ctx, cove.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if r := mustRun(t, ctx, sb, "user", "echo served"); r.out != "served\n" {
		t.Errorf("command: %q", r.out)
	}
	list, err := c.List(ctx, cove.ListOptions{})
	if err != nil || len(list) == 0 {
		t.Errorf("list: %d %v", len(list), err)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Errorf("kill: %v", err)
	}
}

// descriptors counts the descriptors process pid holds.
func descriptors(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// threadsAndMemory is what /proc says of process pid's threads and
// resident memory.
func threadsAndMemory(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "Threads:") || strings.HasPrefix(line, "VmRSS:") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, ", ")
}

type healthAnswer struct {
	Code      int `json:"code"`
	Listeners []struct {
		Addr         string `json:"addr"`
		Accepting    bool   `json:"accepting"`
		AcceptErrors int64  `json:"acceptErrors"`
		LastError    string `json:"lastError"`
	} `json:"listeners"`
	Unauthenticated struct {
		Held    int   `json:"held"`
		Refused int64 `json:"refused"`
		Evicted int64 `json:"evicted"`
	} `json:"unauthenticatedConnections"`
	Descriptors struct {
		InUse   int `json:"sharedInUse"`
		Shared  int `json:"shared"`
		Reserve int `json:"reserve"`
	} `json:"descriptors"`
}

// health is the server's /health, asked from 127.0.0.1 on a connection
// of its own.
func health(t *testing.T, url string) healthAnswer {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := hc.Get(url + "/health")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	defer resp.Body.Close()
	var h healthAnswer
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("health: %d %v", resp.StatusCode, err)
	}
	return h
}
