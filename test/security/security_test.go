// Package security_test attacks a real `cove server` from inside its
// sandboxes and from outside them: hostile programs, faults, load, bad
// input and authentication. Each case's outcome is checked from outside
// the attacking sandbox; docs/SECURITY.md lists them.
package security_test

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	cove "github.com/covesandbox/cove/sdk/go"
)

const apiKey = "e2b_5ec0000000000000000000000000000000000001"

// long reports whether the long forms of the suite run (make test-long).
func long() bool { return os.Getenv("COVE_LONG") != "" }

// client talks to s with apiKey.
func client(t testing.TB, s testutil.Server) *cove.Client {
	t.Helper()
	c, err := cove.NewClient(cove.WithAPIURL(s.URL), cove.WithSandboxURL(s.URL), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// result is a command's combined output and exit code.
type result struct {
	out  string
	code int
}

// run runs cmd in sb as user; a non-zero exit is a result, not an error.
func run(ctx context.Context, sb *cove.Sandbox, user, cmd string, timeout time.Duration) (result, error) {
	res, err := sb.Commands.Run(ctx, cmd, cove.WithUser(user), cove.WithTimeout(timeout))
	var exit *cove.CommandExitError
	if errors.As(err, &exit) {
		return result{exit.Stdout + exit.Stderr, exit.ExitCode}, nil
	}
	if err != nil {
		return result{}, err
	}
	return result{res.Stdout + res.Stderr, res.ExitCode}, nil
}

// mustRun is run that fails the test on a transport error.
func mustRun(t testing.TB, ctx context.Context, sb *cove.Sandbox, user, cmd string) result {
	t.Helper()
	r, err := run(ctx, sb, user, cmd, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return r
}

// listener is a host TCP service that counts the connections it accepted.
type listener struct {
	net.Listener
	accepted atomic.Int32
}

func listen(t testing.TB, addr string) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{Listener: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			c.Write([]byte("host service\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return l
}

func (l *listener) port() string {
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// latency is the median time of n `true` commands in sb, paced.
func latency(t testing.TB, ctx context.Context, sb *cove.Sandbox, n int) time.Duration {
	t.Helper()
	xs := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := sb.Commands.Run(ctx, "true"); err != nil {
			t.Fatalf("neighbour: %v", err)
		}
		xs = append(xs, time.Since(start))
		time.Sleep(20 * time.Millisecond)
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// field returns the value after "name=" in out (up to the end of its line).
func field(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v
		}
	}
	return ""
}
