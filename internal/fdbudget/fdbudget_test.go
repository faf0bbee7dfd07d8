package fdbudget

import (
	"sync"
	"testing"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit, reserve int
		ok             bool
	}{
		{1024, 256, true},
		{1024, 0, true},
		{1024, 1024, false},
		{0, 0, false},
		{1024, -1, false},
	} {
		_, err := New(tc.limit, tc.reserve)
		if (err == nil) != tc.ok {
			t.Errorf("New(%d, %d): %v", tc.limit, tc.reserve, err)
		}
	}
}

func TestDefaultReserve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ limit, want int }{
		{400, 200},       // never more than half
		{1024, 256},      // at least 256
		{20000, 5000},    // a quarter
		{1 << 20, 16384}, // at most 16384
	} {
		if got := DefaultReserve(tc.limit); got != tc.want {
			t.Errorf("DefaultReserve(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// TestReserveKept: however many take at once, what they hold together
// never reaches into the reserve, and all of it comes back.
func TestReserveKept(t *testing.T) {
	t.Parallel()
	b, err := New(1000, 200)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if b.Take(3) {
					mu.Lock()
					taken += 3
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if taken > b.Shared() || b.InUse() != taken {
		t.Fatalf("took %d (in use %d) of a shared %d", taken, b.InUse(), b.Shared())
	}
	if b.Take(b.Shared() - taken + 1) {
		t.Fatal("a Take past the shared part succeeded")
	}
	b.Give(taken)
	if b.InUse() != 0 || !b.Take(b.Shared()) {
		t.Fatalf("after giving all back: in use %d", b.InUse())
	}
}

func TestNilBoundsNothing(t *testing.T) {
	t.Parallel()
	var b *Budget
	if !b.Take(1 << 20) {
		t.Fatal("a nil budget refused")
	}
	b.Give(1 << 20)
}
