package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/testutil"
)

// TestStorageHolds: a team's holds are admitted against what its other
// live holds add up to — changed in place, let go, expired, the other
// team's apart — refused at a changed generation of the records, and of
// holds asked at once against a limit exactly as many as fit are taken.
func TestStorageHolds(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, testutil.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gen, err := s.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 64
	var seen int64
	hold := func(team, id string, n int64, ttl time.Duration, at int64) error {
		return s.HoldStorage(ctx, team, id, n, ttl, at, func(held int64) error {
			seen = held
			if held+n > limit {
				return errs.New(errs.QuotaExceeded, "past the limit")
			}
			return nil
		})
	}
	for _, st := range []struct {
		name     string
		team, id string
		n        int64
		ttl      time.Duration
		stale    bool
		release  string
		want     string // taken, quota (admit's error) or stale (ErrRecordsChanged)
		held     int64  // what admit was told
	}{
		{"the first", "a", "h1", 40, time.Hour, false, "", "taken", 0},
		{"past what the first leaves", "a", "h2", 30, time.Hour, false, "", "quota", 40},
		{"another team's", "b", "h3", 60, time.Hour, false, "", "taken", 0},
		{"the first changed in place", "a", "h1", 60, time.Hour, false, "", "taken", 0},
		{"at a changed generation", "a", "h4", 1, time.Hour, true, "", "stale", -1},
		{"after the first is let go", "a", "h5", 60, time.Nanosecond, false, "h1", "taken", 0},
		{"after that one expired", "a", "h6", 64, time.Hour, false, "", "taken", 0},
	} {
		if st.release != "" {
			if err := s.ReleaseStorage(ctx, st.release); err != nil {
				t.Fatal(err)
			}
		}
		at := gen
		if st.stale {
			at = gen - 1
		}
		seen = -1
		err := hold(st.team, st.id, st.n, st.ttl, at)
		got := "taken"
		switch {
		case errors.Is(err, store.ErrRecordsChanged):
			got = "stale"
		case errs.Is(err, errs.QuotaExceeded):
			got = "quota"
		case err != nil:
			got = err.Error()
		}
		if got != st.want || seen != st.held {
			t.Errorf("%s: %s, admit told %d held; want %s, %d", st.name, got, seen, st.want, st.held)
		}
	}
	if err := s.ReleaseStorage(ctx, "unknown"); err != nil {
		t.Errorf("an unknown hold: %v", err)
	}

	// At once: 8 holds of 10 against 40 (team c's).
	var taken atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			err := s.HoldStorage(ctx, "c", fmt.Sprint("c", i), 10, time.Hour, gen, func(held int64) error {
				if held+10 > 40 {
					return errs.New(errs.QuotaExceeded, "past the limit")
				}
				return nil
			})
			if err == nil {
				taken.Add(1)
			} else if !errs.Is(err, errs.QuotaExceeded) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if taken.Load() != 4 {
		t.Errorf("%d of 8 holds of 10 taken at once against 40, want 4", taken.Load())
	}
}
