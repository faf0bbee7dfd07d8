package fsutil

import (
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
)

// Budget bounds what a job writes to the node's disk as it writes: at most
// Max bytes in all (0: no bound but the floor), and never so much that the
// file system of Dir keeps less than its floor free. An archive's
// compressed size says nothing of what it expands to, so unpacking charges
// every byte it writes here, not what it reads. One Budget may be shared
// by the steps of a job (a build's layers) and by goroutines.
type Budget struct {
	Max int64
	// Dir is on the file system written to; "" checks no floor.
	Dir string
	// MinFree is the floor; 0 is DiskFloor of Dir's file system.
	MinFree int64
	// What scopes the errors: "the team's storage", "the build".
	What string
	// Parent, when set, is charged all this one is: a team's budget
	// that several jobs share.
	Parent *Budget

	mu      sync.Mutex
	used    int64
	checked int64 // used at the last look at the free space
}

// floorCheckEvery is how much a job writes between looks at the free
// space (a statfs).
const floorCheckEvery = 8 << 20

// DiskFloor is the free space a node keeps on a file system of size bytes
// whatever a tenant writes: 5 %, at least 256 MiB, at most 4 GiB.
func DiskFloor(size int64) int64 { return min(max(size/20, 256<<20), 4<<30) }

// Left is what may still be charged before Max: 0 without a Max, and at
// least 1 with one (a Budget of Max 0 is unbounded).
func (b *Budget) Left() int64 {
	if b == nil {
		return 0
	}
	left := b.Parent.Left()
	if b.Max > 0 {
		own := max(b.Max-b.Used(), 1)
		if left == 0 || own < left {
			left = own
		}
	}
	return left
}

// Used is what was charged.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Charge counts n bytes more, or refuses them: QuotaExceeded past Max,
// ResourceExhausted under the floor. A refused charge stays counted: the
// job that made it is to stop.
func (b *Budget) Charge(n int64) error {
	if b == nil {
		return nil
	}
	if err := b.Parent.Charge(n); err != nil {
		return err
	}
	b.mu.Lock()
	b.used += n
	used, look := b.used, b.Dir != "" && (b.checked == 0 || b.used-b.checked >= floorCheckEvery)
	if look {
		b.checked = used
	}
	b.mu.Unlock()
	if b.Max > 0 && used > b.Max {
		return errs.New(errs.QuotaExceeded, "%s: writing more than %s, the most allowed", b.scope(), sizeOf(b.Max))
	}
	if look {
		var fs unix.Statfs_t
		if err := unix.Statfs(b.Dir, &fs); err == nil {
			free, size := int64(fs.Bavail)*int64(fs.Bsize), int64(fs.Blocks)*int64(fs.Bsize) // Bsize is an int32 on some systems
			floor := b.MinFree
			if floor == 0 {
				floor = DiskFloor(size)
			}
			if free-floorCheckEvery < floor {
				return errs.New(errs.ResourceExhausted, "%s: the node keeps %s of its disk free, and %s are", b.scope(), sizeOf(floor), sizeOf(free))
			}
		}
	}
	return nil
}

// Reserve charges n bytes only if they fit under Max (and the Parent's):
// else it charges nothing and says what is left (QuotaExceeded). A job
// that knows its size before it writes (a snapshot) takes it whole or not
// at all, so that a refusal takes nothing from the jobs beside it.
func (b *Budget) Reserve(n int64) error {
	if b == nil {
		return nil
	}
	if err := b.Parent.Reserve(n); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Max > 0 && b.used+n > b.Max {
		if b.Parent != nil {
			b.Parent.Refund(n)
		}
		return errs.New(errs.QuotaExceeded, "%s: %s more would pass %s, the most allowed; %s are left", b.scope(), sizeOf(n), sizeOf(b.Max), sizeOf(max(b.Max-b.used, 0)))
	}
	b.used += n
	return nil
}

// Refund gives back n bytes charged before: a job that ended without
// keeping what it wrote.
func (b *Budget) Refund(n int64) {
	if b == nil {
		return
	}
	b.Parent.Refund(n)
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// sizeOf says n bytes in MiB, or KiB below one.
func sizeOf(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

func (b *Budget) scope() string {
	if b.What == "" {
		return "disk budget"
	}
	return b.What
}

// Writer charges what passes through it to b.
func (b *Budget) Writer(w io.Writer) io.Writer {
	if b == nil {
		return w
	}
	return &budgetWriter{w: w, b: b}
}

type budgetWriter struct {
	w io.Writer
	b *Budget
}

func (bw *budgetWriter) Write(p []byte) (int, error) {
	if err := bw.b.Charge(int64(len(p))); err != nil {
		return 0, err
	}
	return bw.w.Write(p)
}
