package node

import "time"

// Warming a template whose sandboxes fail to start backs off: the first
// retry after warmRetryFirst, each next one twice as late (at most
// warmRetryMax), and after warmGiveUp failures in a row the pool stops
// warming that build. A create that asks for the template still starts its
// sandbox (and gets the failure); a new build of it starts afresh.
const (
	warmRetryFirst = time.Second
	warmRetryMax   = 5 * time.Minute
	warmGiveUp     = 6
)

// warmFailures are the templates whose warm sandboxes failed to start, by
// template id. Guarded by the pool's mutex.
type warmFailures map[string]*warmFailure

type warmFailure struct {
	build string    // the build that failed
	n     int       // failures in a row
	retry time.Time // not before
	last  error
}

// fail records a failed start of build at now; it reports whether the
// pool now gives the template up.
func (f warmFailures) fail(id, build string, err error, now time.Time) (gaveUp bool) {
	w := f[id]
	if w == nil || w.build != build {
		w = &warmFailure{build: build}
		f[id] = w
	}
	w.n++
	w.last = err
	wait := warmRetryFirst << min(w.n-1, 20)
	w.retry = now.Add(min(wait, warmRetryMax))
	return w.n == warmGiveUp
}

// ready reports whether build of template id may be warmed at now.
func (f warmFailures) ready(id, build string, now time.Time) bool {
	w := f[id]
	return w == nil || w.build != build || (w.n < warmGiveUp && !now.Before(w.retry))
}

// next is the earliest retry still to come (zero when none).
func (f warmFailures) next() time.Time {
	var t time.Time
	for _, w := range f {
		if w.n < warmGiveUp && (t.IsZero() || w.retry.Before(t)) {
			t = w.retry
		}
	}
	return t
}
