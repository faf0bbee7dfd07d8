package compat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"

	"github.com/covesandbox/cove/internal/testutil"
)

// keyedAnswer is an answer to a create with an Idempotency-Key.
type keyedAnswer struct {
	status    int
	body      string
	sandbox   string // its sandboxID, when 201
	errorCode string
	retry     string // Should-Retry
}

// createKeyed sends POST path with key (none when "") and body to url.
func createKeyed(t *testing.T, url, path, key, body string) keyedAnswer {
	t.Helper()
	a, err := sendKeyed(url, path, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// sendKeyed is createKeyed for a goroutine of the test's.
func sendKeyed(url, path, key, body string) (keyedAnswer, error) {
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", apiKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header["Idempotency-Key"] = []string{key}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return keyedAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m struct {
		SandboxID string `json:"sandboxID"`
		ErrorCode string `json:"error_code"`
	}
	_ = json.Unmarshal(b, &m)
	return keyedAnswer{resp.StatusCode, string(b), m.SandboxID, m.ErrorCode, resp.Header.Get("Should-Retry")}, nil
}

// slowTemplate builds a template whose sandboxes are ready 5 s after
// they start (a create of it takes that long without a warm pool).
func slowTemplate(t *testing.T, url string) {
	t.Helper()
	c, err := cove.NewClient(cove.WithAPIURL(url), cove.WithSandboxURL(url), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "slow", Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"SLOW", "1"}}},
		// Per sandbox: what the build's own start left in the layer does not count.
		StartCmd: "sleep 5; touch /tmp/ready-$E2B_SANDBOX_ID; sleep 100000", ReadyCmd: "test -f /tmp/ready-$E2B_SANDBOX_ID"}, nil); err != nil {
		t.Fatal(err)
	}
}

// sandboxesTagged lists the ids of the sandboxes whose metadata has
// idem=tag.
func sandboxesTagged(t *testing.T, url, tag string) []string {
	t.Helper()
	ids, _, _ := listIDs(t, url, "/v2/sandboxes?metadata=idem%3D"+tag, "sandboxID")
	return ids
}

// listIDs GETs a list from the API at url: the field named id of each
// item, the X-Next-Token header and the status.
func listIDs(t *testing.T, url, path, id string) ([]string, string, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&list)
	var ids []string
	for _, item := range list {
		if s, ok := item[id].(string); ok {
			ids = append(ids, s)
		}
	}
	return ids, resp.Header.Get("X-Next-Token"), resp.StatusCode
}

// TestIdempotentCreate: creates with an Idempotency-Key (E2B 2.61) on one
// server — a replay answers what the first did and makes nothing; another
// body, a malformed key, a create still running each have their answer;
// a failure for good is replayed; v1 ignores the key — and across a
// crash mid-create: the retry after the restart makes the one sandbox.
func TestIdempotentCreate(t *testing.T) {
	p := testutil.StartProc(t, apiKey, "--pool-size", "0")
	url := p.URL
	body := func(tag string) string {
		return `{"templateID":"base","timeout":120,"metadata":{"idem":"` + tag + `"}}`
	}

	first := createKeyed(t, url, "/v2/sandboxes", "key-1", body("one"))
	if first.status != http.StatusCreated || first.sandbox == "" {
		t.Fatalf("a keyed create: %+v", first)
	}
	// The same body, in another key order and spacing: the same request.
	again := createKeyed(t, url, "/v2/sandboxes", "key-1", `{ "metadata": {"idem": "one"}, "timeout": 120, "templateID": "base" }`)
	if again.status != http.StatusCreated || again.body != first.body {
		t.Errorf("the replay: %+v, want the first answer %s", again, first.body)
	}
	if ids := sandboxesTagged(t, url, "one"); len(ids) != 1 || ids[0] != first.sandbox {
		t.Errorf("after the replay the team has %v, want [%s]", ids, first.sandbox)
	}
	for _, c := range []struct {
		name, key, body string
		status          int
		code, retry     string
	}{
		{"another body", "key-1", body("other"), http.StatusConflict, "idempotency_request_mismatch", "false"},
		{"an empty key", "", "", http.StatusBadRequest, "", "false"},
		{"upper case", "Key-1", body("x"), http.StatusBadRequest, "", "false"},
		{"not ASCII", "clé", body("x"), http.StatusBadRequest, "", "false"},
		{"too long", strings.Repeat("k", 256), body("x"), http.StatusBadRequest, "", "false"},
	} {
		req, _ := http.NewRequest("POST", url+"/v2/sandboxes", strings.NewReader(c.body))
		req.Header.Set("X-API-Key", apiKey)
		req.Header["Idempotency-Key"] = []string{c.key}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			ErrorCode string `json:"error_code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || e.ErrorCode != c.code || resp.Header.Get("Should-Retry") != c.retry {
			t.Errorf("%s: %d %q, Should-Retry %q; want %d %q %q", c.name, resp.StatusCode, e.ErrorCode, resp.Header.Get("Should-Retry"), c.status, c.code, c.retry)
		}
	}
	// A failure for good is kept, and answered again.
	bad := createKeyed(t, url, "/v2/sandboxes", "key-bad", `{"templateID":"no-such-template"}`)
	if bad.status != http.StatusNotFound && bad.status != http.StatusBadRequest {
		t.Fatalf("a create of a missing template: %+v", bad)
	}
	if again := createKeyed(t, url, "/v2/sandboxes", "key-bad", `{"templateID":"no-such-template"}`); again.status != bad.status || again.body != bad.body {
		t.Errorf("the failure's replay: %+v, want %+v", again, bad)
	}
	// v1 ignores the key.
	v1a := createKeyed(t, url, "/sandboxes", "key-v1", body("v1"))
	v1b := createKeyed(t, url, "/sandboxes", "key-v1", body("v1"))
	if v1a.status != http.StatusCreated || v1b.status != http.StatusCreated || v1a.sandbox == v1b.sandbox {
		t.Errorf("v1 creates with one key: %+v and %+v, want two sandboxes", v1a, v1b)
	}

	// While it runs: 409 idempotency_in_progress, to retry; then the answer.
	slowTemplate(t, url)
	slow := `{"templateID":"slow","timeout":120,"metadata":{"idem":"slow"}}`
	busy, wait := createTwice(url, "key-slow", slow)
	if busy.status != http.StatusConflict || busy.errorCode != "idempotency_in_progress" || busy.retry != "true" {
		t.Errorf("the second of two creates at once: %+v, want 409 idempotency_in_progress to retry", busy)
	}
	created := wait()
	if created.status != http.StatusCreated {
		t.Fatalf("the first of two creates at once: %+v", created)
	}
	if a := createKeyed(t, url, "/v2/sandboxes", "key-slow", slow); a.body != created.body {
		t.Errorf("after the slow create: %+v, want its answer", a)
	}

	// A crash mid-create: the server SIGKILLed while a keyed create runs;
	// after the restart the retry makes it, and it is the only one.
	crash := `{"templateID":"slow","timeout":120,"metadata":{"idem":"crash"}}`
	if busy, _ := createTwice(url, "key-crash", crash); busy.errorCode != "idempotency_in_progress" {
		t.Fatalf("the second of two creates at once: %+v", busy)
	}
	p.Restart(true) // the first one's connection dies with the server
	after := createKeyed(t, url, "/v2/sandboxes", "key-crash", crash)
	if after.status != http.StatusCreated {
		t.Fatalf("the retry after the crash: %+v", after)
	}
	if ids := sandboxesTagged(t, url, "crash"); len(ids) != 1 || ids[0] != after.sandbox {
		t.Errorf("after the crash and the retry the team has %v, want [%s]", ids, after.sandbox)
	}
	if a := createKeyed(t, url, "/v2/sandboxes", "key-crash", crash); a.body != after.body {
		t.Errorf("a replay after the crash: %+v, want %s", a, after.body)
	}
}

// createTwice sends two keyed creates at once: one claims the key and
// creates; the other, which returns first, finds it in progress. wait
// returns the creating one's answer.
func createTwice(url, key, body string) (busy keyedAnswer, wait func() keyedAnswer) {
	answers := make(chan keyedAnswer, 2)
	for range 2 {
		go func() {
			a, err := sendKeyed(url, "/v2/sandboxes", key, body)
			if err != nil {
				a.body = err.Error()
			}
			answers <- a
		}()
	}
	return <-answers, func() keyedAnswer { return <-answers }
}

// TestIdempotentCreateCluster: a key is the cluster's, whichever API
// replica a request reaches: a create on one replica is replayed by the
// other, and a create running on one is in progress for the other.
func TestIdempotentCreateCluster(t *testing.T) {
	c := testutil.StartCluster(t, apiKey, testutil.Postgres(t), 2, 1, "--pool-size", "0")
	a, b := c.APIs[0].URL, c.APIs[1].URL
	body := `{"templateID":"base","timeout":120,"metadata":{"idem":"cluster"}}`
	first := createKeyed(t, a, "/v2/sandboxes", "key-cluster", body)
	if first.status != http.StatusCreated {
		t.Fatalf("a keyed create on one replica: %+v", first)
	}
	if again := createKeyed(t, b, "/v2/sandboxes", "key-cluster", body); again.body != first.body {
		t.Errorf("the replay on the other replica: %+v, want %s", again, first.body)
	}
	if other := createKeyed(t, b, "/v2/sandboxes", "key-cluster", `{"templateID":"base"}`); other.errorCode != "idempotency_request_mismatch" {
		t.Errorf("another body on the other replica: %+v", other)
	}
	if ids := sandboxesTagged(t, b, "cluster"); len(ids) != 1 || ids[0] != first.sandbox {
		t.Errorf("the cluster has %v, want [%s]", ids, first.sandbox)
	}
	if code, m := apiCall(t, a, "DELETE", "/sandboxes/"+first.sandbox, ""); code != http.StatusNoContent {
		t.Errorf("kill: %d %v", code, m)
	}
}
