// Package fdbudget divides the server process's file descriptors. What a
// tenant, or a client that has not yet authenticated, can make the server
// hold (egress flows, connections that have sent no request yet, …) takes
// descriptors from one shared Budget; a Reserve that none of them can take
// stays for the API's authenticated clients, the database, the agents'
// connections and the node's own files.
package fdbudget

import (
	"fmt"
	"sync/atomic"
)

// Budget counts descriptors held by the shared pools against what the
// reserve leaves of the process's limit. A nil *Budget bounds nothing.
type Budget struct {
	limit   int64 // the process's descriptor limit
	reserve int64 // kept back from every Take
	used    atomic.Int64
}

// New is a budget of limit descriptors of which reserve are never handed
// out by Take.
func New(limit, reserve int) (*Budget, error) {
	if limit <= 0 || reserve < 0 || reserve >= limit {
		return nil, fmt.Errorf("descriptor budget: reserve %d of a limit of %d", reserve, limit)
	}
	return &Budget{limit: int64(limit), reserve: int64(reserve)}, nil
}

// DefaultReserve is the reserve kept of a process limit: a quarter, at
// least 256 and at most 16384 descriptors (never more than half).
func DefaultReserve(limit int) int {
	return min(max(limit/4, 256), 16384, limit/2)
}

// Take counts n more descriptors held by a shared pool, or refuses
// (false) when they would reach into the reserve.
func (b *Budget) Take(n int) bool {
	if b == nil {
		return true
	}
	for {
		cur := b.used.Load()
		if cur+int64(n) > b.limit-b.reserve {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

// Give returns n descriptors that Take counted.
func (b *Budget) Give(n int) {
	if b == nil {
		return
	}
	if b.used.Add(-int64(n)) < 0 {
		panic("fdbudget: more descriptors given back than taken")
	}
}

// InUse is how many descriptors the shared pools hold now.
func (b *Budget) InUse() int {
	if b == nil {
		return 0
	}
	return int(b.used.Load())
}

// Shared is how many descriptors the shared pools may hold together: the
// limit less the reserve.
func (b *Budget) Shared() int {
	if b == nil {
		return 0
	}
	return int(b.limit - b.reserve)
}

// Reserve is how many descriptors no Take hands out.
func (b *Budget) Reserve() int {
	if b == nil {
		return 0
	}
	return int(b.reserve)
}
