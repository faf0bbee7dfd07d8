// Package testkit holds the small helpers tests keep needing: what a test
// needs of its machine, and a wait for a condition. It imports nothing of
// Cove's, so that any package's own tests can use it (testutil, which
// starts servers, cannot serve the packages it imports).
package testkit

import (
	"cmp"
	"os"
	"testing"
	"time"
)

// NeedRoot skips the test unless it runs as root (CI runs as root, so
// there it always runs), saying why ("" says it needs root).
func NeedRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip(cmp.Or(why, "needs root"))
	}
}

// Eventually calls check every 50 ms until it returns nil, and fails the
// test with check's last error once timeout has passed. check may end the
// test itself (t.Fatal) when what it sees can never come right.
func Eventually(tb testing.TB, timeout time.Duration, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Wait calls cond every 50 ms until it reports true or timeout has
// passed, and reports whether it did: for a test that goes on either way
// and says itself what it saw.
func Wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
