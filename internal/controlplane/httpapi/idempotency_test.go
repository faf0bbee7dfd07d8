package httpapi

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/nodefake"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestKeyedCreatesBounded: a loop of keyed creates of a template that does
// not exist keeps at most the team's bound of keys; a failure is replayed
// for 10 minutes, then its key runs the create again; another team's
// keyed create is answered, replayed an hour on, and its events listed.
func TestKeyedCreatesBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cove.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const max, loop = 50, 300
	st.SetLimits(store.Limits{IdempotencyKeys: max, Events: 1000, EventBytes: 1 << 20})
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys := func(team string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM idempotency WHERE team = ?`, team).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	clk := &clock{t: time.Unix(1700000000, 0)}
	var creates atomic.Int64 // creates that ran (not replayed)
	cfg := service.Config{Now: clk.now, CanUseTemplate: func(team, ref string) error {
		creates.Add(1)
		if ref == "missing" {
			return errs.New(errs.NotFound, "template %s not found", ref)
		}
		return nil
	}}
	log := slog.New(slog.DiscardHandler)
	secret := []byte("unit-test-secret")
	a := New(service.New(cfg, st, nodefake.New(secret), secret, log), nil, nil, nil, st, log)
	post := func(team, key, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v2/sandboxes", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		a.ServeAs(team, w, r)
		return w
	}
	const missing = `{"templateID":"missing","timeout":60}`

	for i := range loop {
		if w := post("a", fmt.Sprintf("k-%d", i), missing); w.Code != http.StatusNotFound {
			t.Fatalf("keyed create %d of a missing template: %d %s", i, w.Code, w.Body)
		}
		if n := keys("a"); n > max {
			t.Fatalf("after %d keyed creates team a keeps %d keys, at most %d", i+1, n, max)
		}
		clk.add(time.Second)
	}
	ran := creates.Load()
	if w := post("a", fmt.Sprintf("k-%d", loop-1), missing); w.Code != http.StatusNotFound || creates.Load() != ran {
		t.Errorf("the newest key's replay: %d, %d creates ran (want its answer, none)", w.Code, creates.Load()-ran)
	}
	clk.add(store.IdempotencyFailureKept)
	if w := post("a", fmt.Sprintf("k-%d", loop-1), missing); w.Code != http.StatusNotFound || creates.Load() != ran+1 {
		t.Errorf("the key 10 minutes on: %d, %d creates ran (want the create run again)", w.Code, creates.Load()-ran)
	}

	const base = `{"templateID":"base","timeout":60}`
	first := post("b", "b-1", base)
	if first.Code != http.StatusCreated {
		t.Fatalf("team b's keyed create: %d %s", first.Code, first.Body)
	}
	clk.add(time.Hour)
	ran = creates.Load()
	if again := post("b", "b-1", base); again.Code != http.StatusCreated || again.Body.String() != first.Body.String() || creates.Load() != ran {
		t.Errorf("team b's key an hour on: %d %s, %d creates ran; want %s replayed", again.Code, again.Body, creates.Load()-ran, first.Body)
	}
	var sb struct{ SandboxID string }
	if err := json.Unmarshal(first.Body.Bytes(), &sb); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	a.ServeAs("b", w, httptest.NewRequest(http.MethodGet, "/events/sandboxes/"+sb.SandboxID, nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), store.EventCreated) {
		t.Errorf("team b's events: %d %s", w.Code, w.Body)
	}
}
