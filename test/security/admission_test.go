package security_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// TestAdmission asks a node for more than it has: a template of 4 GiB and
// 8 CPUs, created until the node's promise (here half its memory) is
// used; one of 64 GiB; and more sandboxes than a team's quota. Each
// refusal names its reason; what was accepted fits the node.
func TestAdmission(t *testing.T) {
	p := newCove(t, "", "--network=false", "--pool-size", "0", "--memory-overcommit", "0.5", "--team-max-sandboxes", "3")
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, b := range []cove.TemplateBuild{
		{Name: "big", MemoryMB: 4096, CPUCount: 8, Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"SIZE", "big"}}}},
		{Name: "huge", MemoryMB: 65536, CPUCount: 2, Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"SIZE", "huge"}}}},
	} {
		if _, err := c.BuildTemplate(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	status := func(err error) int {
		var apiErr *cove.APIError
		if errors.As(err, &apiErr) {
			return apiErr.Status
		}
		return 0
	}
	hostMB := hostMemoryMB(t)

	t.Run("more memory than the node has", func(t *testing.T) {
		if hostMB > 65536 {
			t.Skipf("the host has %d MiB", hostMB)
		}
		_, err := c.Create(ctx, cove.CreateOptions{Template: "huge"})
		if status(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "this node has") {
			t.Errorf("a 64 GiB sandbox: %v, want 400 naming the node's memory", err)
		}
	})

	t.Run("past the node's promise", func(t *testing.T) {
		var made []*cove.Sandbox
		defer func() {
			for _, sb := range made {
				sb.Kill(context.Background())
			}
		}()
		fits := int(hostMB / 2 / 4096) // the overcommit of 0.5
		var err error
		for len(made) <= fits {
			var sb *cove.Sandbox
			if sb, err = c.Create(ctx, cove.CreateOptions{Template: "big"}); err != nil {
				break
			}
			made = append(made, sb)
			if len(made) > 3 { // the team's quota
				t.Fatalf("%d sandboxes for a team allowed 3", len(made))
			}
		}
		wantStatus, want := http.StatusServiceUnavailable, "node is full"
		if fits >= 3 {
			wantStatus, want = http.StatusTooManyRequests, "team quota"
		}
		if status(err) != wantStatus || !strings.Contains(err.Error(), want) {
			t.Fatalf("after %d sandboxes of 4 GiB on %d MiB: %v, want %d %q", len(made), hostMB, err, wantStatus, want)
		}
		// Either refusal may pass later: the SDKs' retries are told so.
		code := ""
		if wantStatus == http.StatusServiceUnavailable {
			code = "sandbox_capacity_unavailable"
		}
		checkRetryHint(t, p.srv.URL, `{"templateID":"big"}`, wantStatus, "true", "1", code)
		t.Logf("refused after %d: %v", len(made), err)
		if len(made) > 0 {
			info, err := c.Info(ctx, made[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.CPUCount > runtime.NumCPU() {
				t.Errorf("a sandbox promised %d CPUs on %d", info.CPUCount, runtime.NumCPU())
			}
		}
	})

	t.Run("past the team's quota", func(t *testing.T) {
		var made []*cove.Sandbox
		defer func() {
			for _, sb := range made {
				sb.Kill(context.Background())
			}
		}()
		for range 3 {
			sb, err := c.Create(ctx, cove.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			made = append(made, sb)
		}
		_, err := c.Create(ctx, cove.CreateOptions{})
		if status(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "team quota: 3 sandboxes running, at most 3") {
			t.Errorf("a fourth sandbox: %v, want 429 naming the quota", err)
		}
		checkRetryHint(t, p.srv.URL, `{"templateID":"base"}`, http.StatusTooManyRequests, "true", "1", "")
		// A request that cannot pass as it is: never retried.
		checkRetryHint(t, p.srv.URL, `{"templateID":"base","timeout":-1}`, http.StatusBadRequest, "false", "", "")
		made[0].Kill(ctx)
		made = made[1:]
		sb, err := c.Create(ctx, cove.CreateOptions{})
		if err != nil {
			t.Fatalf("a create once one ended: %v", err)
		}
		made = append(made, sb)
	})
}

// checkRetryHint creates a sandbox with body through the API at url and
// checks what the SDKs' retries read of the refusal: its status, the
// Should-Retry and Retry-After headers and the body's error_code.
func checkRetryHint(t *testing.T, url, body string, status int, retry, after, code string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v2/sandboxes", strings.NewReader(body))
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Code      int    `json:"code"`
		ErrorCode string `json:"error_code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != status || e.Code != status || resp.Header.Get("Should-Retry") != retry || resp.Header.Get("Retry-After") != after || e.ErrorCode != code {
		t.Errorf("create %s: %d (code %d, error_code %q), Should-Retry %q, Retry-After %q; want %d, %q, %q, %q", body, resp.StatusCode, e.Code, e.ErrorCode,
			resp.Header.Get("Should-Retry"), resp.Header.Get("Retry-After"), status, code, retry, after)
	}
}

// hostMemoryMB is the host's memory, as the node reads it.
func hostMemoryMB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb >> 10
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

// TestTeamStorageQuota fills most of a team's layer storage with a build:
// the next build, whose layer would pass the quota, fails with the quota
// named, until the team deletes a template.
func TestTeamStorageQuota(t *testing.T) {
	p := newCove(t, "", "--network=false", "--pool-size", "0", "--team-max-storage-mb", "8")
	c := client(t, p.srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	step := func(name string) cove.TemplateBuild {
		return cove.TemplateBuild{Name: name, Steps: []cove.TemplateStep{
			{Type: "RUN", Args: []string{"head -c 6291456 /dev/urandom > /opt/" + name, "root"}},
		}}
	}
	if _, err := c.BuildTemplate(ctx, step("first"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.BuildTemplate(ctx, step("second"), nil)
	if err == nil || !strings.Contains(err.Error(), "the team's storage quota: writing more than") {
		t.Fatalf("a build past the team's 8 MiB of layers: %v, want it failed naming the quota", err)
	}
	t.Logf("failed: %v", err)
	if err := c.DeleteTemplate(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BuildTemplate(ctx, step("second"), nil); err != nil {
		t.Errorf("a build once the team deleted its template: %v", err)
	}
}
