package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/nodefake"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// claimCounter is a store that counts how often each delivery is
// claimed.
type claimCounter struct {
	store.Store
	mu     sync.Mutex
	claims map[string]int
}

func (c *claimCounter) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.Delivery, error) {
	due, err := c.Store.ClaimDeliveries(ctx, now, lease, limit)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range due {
		c.claims[d.ID]++
	}
	return due, err
}

// TestWebhookBurst: a burst of one team's events to a receiver that
// answers is sent as its team's slots free up, each delivery claimed
// once, never more than the team's share at once. (Its deliveries past
// that share used to wait out their claim's lease, 20 s, before another
// claim.)
func TestWebhookBurst(t *testing.T) {
	t.Parallel()
	const events = 13
	var inFlight, most, got atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond) // long enough for the sender to fill its slots
		got.Add(1)
	}))
	defer receiver.Close()

	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cove.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := &claimCounter{Store: db, claims: map[string]int{}}
	svc := service.New(service.Config{WebhookAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, st, nodefake.New(secret), secret, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	team, err := service.CreateTeam(ctx, st, "burst", store.TeamQuota{})
	if err != nil {
		t.Fatal(err)
	}
	url, created := receiver.URL, []string{store.EventCreated}
	if _, err := svc.CreateWebhook(ctx, team.ID, service.WebhookChange{URL: &url, Events: &created}); err != nil {
		t.Fatal(err)
	}
	for range events {
		create(t, svc, func(r *service.CreateRequest) { r.Team = team.ID })
	}

	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunWebhooks(run)
	}()
	testkit.Eventually(t, time.Minute, func() error {
		if n := got.Load(); n < events {
			return fmt.Errorf("%d of %d deliveries received", n, events)
		}
		return nil
	})
	stop()
	<-done

	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.claims) != events {
		t.Errorf("%d deliveries claimed, want %d", len(st.claims), events)
	}
	for id, n := range st.claims {
		if n != 1 {
			t.Errorf("delivery %s claimed %d times: it waited for its lease instead of its team's slot", id, n)
		}
	}
	if m := most.Load(); m > 4 {
		t.Errorf("%d of the team's deliveries at once, more than its share (4)", m)
	}
}
