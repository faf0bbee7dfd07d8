package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	release, _, err := TryLock(path, "first")
	if err != nil {
		t.Fatal(err)
	}
	if _, holder, err := TryLock(path, "second"); !errors.Is(err, ErrLocked) || holder != "first" {
		t.Errorf("taken: %q %v", holder, err)
	}
	release()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock file outlives its release: %v", err)
	}
	// Many takers at once: never two holders, even as each removes the
	// file it held.
	var held, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				release, _, err := TryLock(path, "racer")
				if err != nil {
					continue
				}
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				held.Add(-1)
				release()
			}
		}()
	}
	wg.Wait()
	if most.Load() > 1 {
		t.Errorf("%d holders at once", most.Load())
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("left: %v", err)
	}
}
