package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

// TestEventsAndWebhooksCLI: `cove webhook` creates, lists, updates and
// deletes a webhook that receives a sandbox's events on loopback (allowed
// by --webhook-allow), and `cove sandbox events` shows the same events,
// -f until the sandbox is killed.
func TestEventsAndWebhooksCLI(t *testing.T) {
	var mu sync.Mutex
	var received []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e struct {
			Type      string `json:"type"`
			SandboxID string `json:"sandboxId"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &e) == nil && r.Header.Get("e2b-signature") != "" {
			mu.Lock()
			received = append(received, e.Type+" "+e.SandboxID)
			mu.Unlock()
		}
	}))
	defer hook.Close()
	srv := testutil.StartServer(t, key, "--webhook-allow", "127.0.0.0/8")
	c := cli{bin: testutil.Binary(t), env: append(os.Environ(), "COVE_API_URL="+srv.URL, "COVE_API_KEY="+key)}

	out, errOut, code := c.run(t, "", "webhook", "create", "--name", "ci", "--url", hook.URL, "--secret", "s3cret",
		"--event", "sandbox.lifecycle.created,sandbox.lifecycle.killed")
	hookID := strings.TrimSpace(out)
	if code != 0 || hookID == "" {
		t.Fatalf("webhook create: %q %q %d", out, errOut, code)
	}
	if out, _, _ := c.run(t, "", "webhook", "list"); !strings.Contains(out, hookID) || !strings.Contains(out, "created,killed") || strings.Contains(out, "s3cret") {
		t.Errorf("webhook list: %q", out)
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer failing.Close()
	out, _, _ = c.run(t, "", "webhook", "create", "--name", "down", "--url", failing.URL, "--event", "sandbox.lifecycle.created")
	downID := strings.TrimSpace(out)
	if _, errOut, code := c.run(t, "", "webhook", "create", "--url", "ftp://example.test/"); code == 0 || !strings.Contains(errOut, "http") {
		t.Errorf("webhook create with an ftp URL: %q %d, want it refused", errOut, code)
	}

	out, _, _ = c.run(t, "", "sandbox", "create", "--metadata", "job=events")
	id := strings.TrimSpace(out)
	follow := make(chan string, 1)
	go func() {
		out, errOut, _ := c.run(t, "", "sandbox", "events", "-f", id)
		follow <- out + errOut
	}()
	time.Sleep(500 * time.Millisecond)
	if _, errOut, code := c.run(t, "", "sandbox", "kill", id); code != 0 {
		t.Fatalf("kill: %s", errOut)
	}
	select {
	case out := <-follow:
		if !strings.Contains(out, "created") || !strings.Contains(out, "job=events") || !strings.Contains(out, "killed") {
			t.Errorf("sandbox events -f: %q", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sandbox events -f did not end with the sandbox")
	}
	if out, _, code := c.run(t, "", "sandbox", "events", "--type", "sandbox.lifecycle.killed", "--json", id); code != 0 ||
		strings.Count(out, "\n") != 1 || !strings.Contains(out, `"type":"sandbox.lifecycle.killed"`) {
		t.Errorf("sandbox events --type killed --json: %q %d", out, code)
	}
	want := []string{"sandbox.lifecycle.created " + id, "sandbox.lifecycle.killed " + id}
	if !testkit.Wait(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(received, ",") == strings.Join(want, ",")
	}) {
		mu.Lock()
		t.Errorf("the webhook received %q, want %q", received, want)
		mu.Unlock()
	}

	// The failing webhook's delivery stays, with its attempts and why.
	var deliveries string
	if !testkit.Wait(30*time.Second, func() bool {
		deliveries, _, _ = c.run(t, "", "webhook", "deliveries", downID)
		return strings.Contains(deliveries, "500 Internal Server Error")
	}) || !strings.Contains(deliveries, "created") || !strings.Contains(deliveries, id) {
		t.Errorf("webhook deliveries of a failing receiver: %q", deliveries)
	}
	if out, _, _ := c.run(t, "", "webhook", "deliveries", hookID); strings.Count(out, "\n") != 1 {
		t.Errorf("webhook deliveries of a receiver that took everything: %q, want the header only", out)
	}
	if _, errOut, code := c.run(t, "", "webhook", "update", hookID, "--disable", "--name", "off"); code != 0 {
		t.Errorf("webhook update: %q", errOut)
	}
	if out, _, _ := c.run(t, "", "webhook", "list", "--json"); !strings.Contains(out, `"enabled": false`) || !strings.Contains(out, `"name": "off"`) {
		t.Errorf("webhook list after update: %q", out)
	}
	if _, errOut, code := c.run(t, "", "webhook", "update", hookID); code == 0 || !strings.Contains(errOut, "nothing to change") {
		t.Errorf("webhook update without a flag: %q %d", errOut, code)
	}
	if _, errOut, code := c.run(t, "", "webhook", "delete", hookID); code != 0 {
		t.Errorf("webhook delete: %q", errOut)
	}
	if _, errOut, code := c.run(t, "", "webhook", "delete", hookID); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("webhook delete again: %q %d, want not found", errOut, code)
	}
}
