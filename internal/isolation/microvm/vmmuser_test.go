package microvm

import (
	"testing"
)

// TestTakeVMMUser: uids are handed out once while their lock is held
// (by this or another process), and again once it is let go.
func TestTakeVMMUser(t *testing.T) {
	dir := t.TempDir()
	a, la, err := takeVMMUser(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, lb, err := takeVMMUser(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a != vmmUserBase || b != vmmUserBase+1 {
		t.Fatalf("uids %d and %d, want %d and %d", a, b, vmmUserBase, vmmUserBase+1)
	}
	la.Close() // its QEMU exited
	c, lc, err := takeVMMUser(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c != a {
		t.Errorf("a freed uid was not taken again: %d, want %d", c, a)
	}
	lb.Close()
	lc.Close()
}
