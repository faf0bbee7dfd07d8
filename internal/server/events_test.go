package server_test

import (
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/server"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// receiver is a webhook receiver of the test's: it checks each delivery's
// signature with the secret it knows, and answers failures first (fail
// times 500) when told to.
type receiver struct {
	*httptest.Server
	secret string

	mu         sync.Mutex
	fail       int
	attempts   int
	deliveries []delivery
}

type delivery struct {
	webhook, id, typ, sandbox, reason string
	signed                            bool // the signature matched the receiver's secret
	body                              string
}

func newReceiver(t *testing.T, secret string, fail int) *receiver {
	r := &receiver{secret: secret, fail: fail}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.attempts++
		if r.fail > 0 {
			r.fail--
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		var e struct {
			Type      string `json:"type"`
			SandboxID string `json:"sandboxId"`
			EventData struct {
				Reason string `json:"reason"`
			} `json:"eventData"`
		}
		_ = json.Unmarshal(body, &e)
		r.deliveries = append(r.deliveries, delivery{webhook: req.Header.Get("e2b-webhook-id"), id: req.Header.Get("e2b-delivery-id"),
			typ: strings.TrimPrefix(e.Type, "sandbox.lifecycle."), sandbox: e.SandboxID, reason: e.EventData.Reason,
			signed: req.Header.Get("e2b-signature") == signature(r.secret, body) && req.Header.Get("e2b-signature-version") == "v1",
			body:   string(body)})
	}))
	t.Cleanup(r.Close)
	return r
}

// signature is the rule docs/GUIDE.md gives a receiver: SHA-256 of the
// secret followed by the raw body, unpadded standard base64.
func signature(secret string, body []byte) string {
	sum := sha256.Sum256(append([]byte(secret), body...))
	return base64.RawStdEncoding.EncodeToString(sum[:])
}

// of lists what the receiver took of sandbox id: "type/reason" each.
func (r *receiver) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, d := range r.deliveries {
		if d.sandbox == id {
			out = append(out, d.typ+"/"+d.reason)
		}
	}
	return out
}

// TestEventsAndWebhooks: a sandbox's life is recorded as events (with
// their reasons) that the events API lists, by sandbox and team, type
// and page, and that each webhook asking for them receives once, signed
// with its secret; a receiver that fails gets them again until it takes
// them; a receiver with another secret sees signatures it cannot match;
// webhook targets outside what the operator allows are refused.
func TestEventsAndWebhooks(t *testing.T) {
	s := startWith(t, func(c *server.Config) { c.WebhookAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	good := newReceiver(t, "right secret", 0)
	flaky := newReceiver(t, "flaky secret", 3)
	wrong := newReceiver(t, "another secret", 0)
	hook := func(body string) string {
		t.Helper()
		code, m, raw := s.do(t, "POST", "/events/webhooks", keyA, body)
		if code != http.StatusCreated || strings.Contains(string(raw), "secret") {
			t.Fatalf("create webhook: %d %s", code, raw)
		}
		return m["id"].(string)
	}
	goodID := hook(`{"name":"all","url":"` + good.URL + `/hook","signatureSecret":"right secret"}`)
	hook(`{"name":"ends","url":"` + flaky.URL + `","events":["sandbox.lifecycle.killed"],"signatureSecret":"flaky secret"}`)
	hook(`{"name":"wrong","url":"` + wrong.URL + `","events":["sandbox.lifecycle.created"],"signatureSecret":"right secret"}`)
	// The database keeps the secrets sealed with the server's secrets key.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.dataDir, "cove.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT secret FROM webhooks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var stored string
		if err := rows.Scan(&stored); err != nil || !strings.HasPrefix(stored, "sealed:") || strings.Contains(stored, "secret") {
			t.Errorf("a webhook's secret as stored: %q %v, want it sealed", stored, err)
		}
	}
	rows.Close()
	db.Close()
	for _, bad := range []string{
		`{"url":"http://169.254.169.254/latest"}`, `{"url":"http://10.0.0.1/"}`, `{"url":"ftp://example.com/"}`, `{"url":"http://198.18.0.6:49983/"}`,
		`{"url":"http://user:pw@example.com/"}`, `{"url":"https://example.com/","events":["sandbox.lifecycle.exploded"]}`,
	} {
		if code, _, raw := s.do(t, "POST", "/events/webhooks", keyA, bad); code != http.StatusBadRequest {
			t.Errorf("webhook %s: %d %s, want 400", bad, code, raw)
		}
	}
	// Another team sees none of them.
	if code, _, raw := s.do(t, "GET", "/events/webhooks", keyB, ""); code != 200 || string(raw) != "[]\n" && string(raw) != "[]" {
		t.Errorf("team B's webhooks: %d %s", code, raw)
	}
	if code, _, _ := s.do(t, "GET", "/events/webhooks/"+goodID, keyB, ""); code != http.StatusNotFound {
		t.Errorf("team B reads team A's webhook: %d", code)
	}

	id := s.create(t, keyA)["sandboxID"].(string)
	for _, step := range []struct{ method, path, body string }{
		{"POST", "/sandboxes/" + id + "/timeout", `{"timeout":300}`},
		{"POST", "/sandboxes/" + id + "/pause", ``},
		{"POST", "/sandboxes/" + id + "/resume", `{"timeout":300}`},
		{"DELETE", "/sandboxes/" + id, ``},
	} {
		if code, _, raw := s.do(t, step.method, step.path, keyA, step.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", step.method, step.path, code, raw)
		}
	}
	_, m, _ := s.do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"base","timeout":1}`)
	timedOut := m["sandboxID"].(string)

	want := []string{"created/api", "updated/api", "paused/api", "resumed/api", "killed/api"}
	// Team A's deliveries, over its webhooks, outnumber the 4 it sends at
	// once (maxTeamSending): the others take its slots as they free up,
	// so they may arrive in another order than the events' (the events
	// API below lists them in theirs).
	sorted := func(s []string) string { return strings.Join(slices.Sorted(slices.Values(s)), ",") }
	waitFor(t, func() bool {
		return sorted(good.of(id)) == sorted(want) && len(good.of(timedOut)) == 2
	})
	if got := good.of(timedOut); sorted(got) != "created/api,killed/timeout" {
		t.Errorf("the timed-out sandbox's deliveries: %v", got)
	}
	good.mu.Lock()
	ids := map[string]bool{}
	for _, d := range good.deliveries {
		if !d.signed || d.webhook != goodID || ids[d.id] {
			t.Errorf("a delivery: %+v (signed with the receiver's secret, from its webhook, once)", d)
		}
		ids[d.id] = true
	}
	good.mu.Unlock()
	waitWithin(t, 3*time.Minute, func() bool { return len(flaky.of(id)) == 1 && len(flaky.of(timedOut)) == 1 })
	flaky.mu.Lock()
	if flaky.attempts < 5 || !flaky.deliveries[0].signed {
		t.Errorf("the flaky receiver: %d attempts for 2 deliveries after 3 failures, first %+v", flaky.attempts, flaky.deliveries[0])
	}
	flaky.mu.Unlock()
	waitWithin(t, 3*time.Minute, func() bool { return len(wrong.of(id)) == 1 })
	wrong.mu.Lock()
	if wrong.deliveries[0].signed {
		t.Error("a receiver with another secret matched the signature")
	}
	wrong.mu.Unlock()

	// The events API: a sandbox's, in order; the team's, by type and page.
	list := func(key, path string) []string {
		t.Helper()
		code, _, raw := s.do(t, "GET", path, key, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, raw)
		}
		var events []struct {
			Type, SandboxID, SandboxTeamID string
			EventData                      struct{ Reason string }
		}
		if err := json.Unmarshal(raw, &events); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, raw)
		}
		var out []string
		for _, e := range events {
			out = append(out, strings.TrimPrefix(e.Type, "sandbox.lifecycle.")+"/"+e.EventData.Reason)
		}
		return out
	}
	if got := list(keyA, "/events/sandboxes/"+id+"?orderAsc=true"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the sandbox's events: %v, want %v", got, want)
	}
	if got := list(keyA, "/events/sandboxes/"+id+"?limit=2&offset=1"); strings.Join(got, ",") != "resumed/api,paused/api" {
		t.Errorf("a page of the sandbox's events, newest first: %v", got)
	}
	if got := list(keyA, "/events/sandboxes?types=sandbox.lifecycle.killed"); strings.Join(got, ",") != "killed/timeout,killed/api" {
		t.Errorf("the team's kills: %v", got)
	}
	if got := list(keyB, "/events/sandboxes/"+id); len(got) != 0 {
		t.Errorf("team B lists team A's sandbox's events: %v", got)
	}
	if code, _, _ := s.do(t, "GET", "/events/sandboxes?types=nonsense", keyA, ""); code != http.StatusBadRequest {
		t.Errorf("an unknown type: %d, want 400", code)
	}
	// Updated and deleted webhooks.
	if code, m, raw := s.do(t, "PATCH", "/events/webhooks/"+goodID, keyA, `{"enabled":false}`); code != 200 || m["enabled"] != false || m["url"] != good.URL+"/hook" {
		t.Errorf("disable a webhook: %d %s", code, raw)
	}
	if code, _, _ := s.do(t, "DELETE", "/events/webhooks/"+goodID, keyA, ""); code != http.StatusNoContent {
		t.Errorf("delete a webhook: %d", code)
	}
	if code, _, _ := s.do(t, "DELETE", "/events/webhooks/"+goodID, keyA, ""); code != http.StatusNotFound {
		t.Errorf("delete it again: %d", code)
	}
}

// waitFor polls cond for up to a minute: a bound on liveness, not a
// measure.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitWithin(t, time.Minute, cond)
}

// waitWithin polls cond for up to bound.
func waitWithin(t *testing.T, bound time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("not within %v", bound)
}

// TestWebhooksReplicaDies: in a cluster, the replica that recorded an
// event and was sending it to a failing receiver is killed; the other
// replica delivers it once the receiver recovers.
func TestWebhooksReplicaDies(t *testing.T) {
	t.Setenv("COVE_WEBHOOK_ALLOW", "127.0.0.0/8")
	c := testutil.StartCluster(t, keyA, testutil.Postgres(t), 2, 1)
	rcv := newReceiver(t, "s", 1<<30) // fails until told otherwise
	first, second := srv{url: c.APIs[0].URL}, srv{url: c.APIs[1].URL}
	if code, _, raw := first.do(t, "POST", "/events/webhooks", keyA, `{"url":"`+rcv.URL+`","events":["sandbox.lifecycle.created"],"signatureSecret":"s"}`); code != http.StatusCreated {
		t.Fatalf("create webhook: %d %s", code, raw)
	}
	id := first.create(t, keyA)["sandboxID"].(string)
	waitFor(t, func() bool { rcv.mu.Lock(); defer rcv.mu.Unlock(); return rcv.attempts >= 1 })
	c.KillAPI(t, 0)
	rcv.mu.Lock()
	rcv.fail = 0
	rcv.mu.Unlock()
	waitFor(t, func() bool { return len(rcv.of(id)) == 1 })
	if code, _, _ := second.do(t, "DELETE", "/sandboxes/"+id, keyA, ""); code != http.StatusNoContent {
		t.Errorf("kill through the other replica: %d", code)
	}
}

// TestWebhooksFairAcrossTeams: one team's webhooks to receivers that
// never answer hold a bounded share of the delivery slots, so another
// team's delivery arrives while they hang; a team's webhooks are capped.
func TestWebhooksFairAcrossTeams(t *testing.T) {
	s := startWith(t, func(c *server.Config) { c.WebhookAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	release := make(chan struct{})
	var mu sync.Mutex
	hung, peak := 0, 0 // team A's deliveries hanging now, and at most
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hung++
		peak = max(peak, hung)
		mu.Unlock()
		select { // until the test ends, or the sender gives up
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		hung--
		mu.Unlock()
	}))
	defer hang.Close()
	defer close(release)
	good := newReceiver(t, "b's secret", 0)
	for i := range service.MaxTeamWebhooks {
		if code, _, raw := s.do(t, "POST", "/events/webhooks", keyA, fmt.Sprintf(`{"name":"hang-%d","url":"%s/%d"}`, i, hang.URL, i)); code != http.StatusCreated {
			t.Fatalf("create webhook %d: %d %s", i, code, raw)
		}
	}
	if code, _, raw := s.do(t, "POST", "/events/webhooks", keyA, `{"name":"one more","url":"`+hang.URL+`/more"}`); code != http.StatusTooManyRequests {
		t.Errorf("a webhook past the team's cap: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "POST", "/events/webhooks", keyB, `{"name":"b","url":"`+good.URL+`","signatureSecret":"b's secret"}`); code != http.StatusCreated {
		t.Fatalf("team B's webhook: %d %s", code, raw)
	}
	// Team A's create makes a delivery per webhook, all hanging; then B's.
	a := s.create(t, keyA)["sandboxID"].(string)
	testkit.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if hung == 0 {
			return errors.New("no delivery of team A's hangs yet")
		}
		return nil
	})
	b := s.create(t, keyB)["sandboxID"].(string)
	testkit.Eventually(t, 30*time.Second, func() error {
		if len(good.of(b)) == 0 {
			return errors.New("team B's delivery has not arrived")
		}
		return nil
	})
	mu.Lock()
	if peak > 4 {
		t.Errorf("team A's deliveries held %d of the delivery slots at once", peak)
	}
	mu.Unlock()
	for _, id := range []string{a, b} {
		key := keyA
		if id == b {
			key = keyB
		}
		s.do(t, "DELETE", "/sandboxes/"+id, key, "")
	}
}
