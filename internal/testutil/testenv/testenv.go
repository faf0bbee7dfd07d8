// Package testenv checks what a test needs of the machine it runs on. It
// imports nothing of Cove's, so that any package's own tests can use it
// (testutil, which starts servers, cannot serve the packages it imports).
package testenv

import (
	"cmp"
	"os"
	"testing"
)

// NeedRoot skips the test unless it runs as root (CI runs as root, so
// there it always runs), saying why ("" says it needs root).
func NeedRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip(cmp.Or(why, "needs root"))
	}
}
