package security_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// TestBuildOutputBounded: a team's build step prints one 200 MB line
// without a newline, then 20 000 lines of 300 bytes. The server's memory stays
// bounded; the stored log is within its cap (lines cut at 8 KiB, 10 000
// entries and 2 MiB of output, then one "log truncated" entry; each
// step's start and the end still logged) and charged to the
// team's storage (a quota of 2 MiB, which its layers alone leave room in, refuses the team's next build); the status
// answer is paged; deleting the template deletes its log. Another team
// builds meanwhile.
func TestBuildOutputBounded(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0", "--team-max-storage-mb", "2")
	pid := p.cmd.Process.Pid
	mine, theirs := client(t, p.srv), clientFor(t, p.srv, otherKey)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	hwm0 := procStatus(t, pid, "VmHWM")

	var wg sync.WaitGroup
	wg.Add(1)
	var theirErr error
	var theirLog []string
	go func() { // the other team, beside
		defer wg.Done()
		_, theirErr = theirs.BuildTemplate(ctx, cove.TemplateBuild{Name: "quiet", Steps: []cove.TemplateStep{
			{Type: "RUN", Args: []string{"sleep 2; echo quiet-one; echo quiet-two"}},
		}}, func(l cove.BuildLog) { theirLog = append(theirLog, l.Message) })
	}()
	var got []cove.BuildLog
	built, err := mine.BuildTemplate(ctx, cove.TemplateBuild{Name: "noisy", Steps: []cove.TemplateStep{
		{Type: "RUN", Args: []string{"head -c 200000000 /dev/zero | tr '\\0' x; echo; yes \"$(head -c 300 /dev/zero | tr '\\0' y)\" | head -n 20000"}},
		{Type: "RUN", Args: []string{"echo printed-past-the-cap"}},
	}}, func(l cove.BuildLog) { got = append(got, l) })
	if err != nil {
		t.Fatalf("the noisy build: %v", err)
	}
	wg.Wait()
	if theirErr != nil || !strings.Contains(strings.Join(theirLog, "\n"), "quiet-two") {
		t.Errorf("the other team's build beside it: %v, log %q", theirErr, theirLog)
	}

	hwm := procStatus(t, pid, "VmHWM")
	t.Logf("the server's VmHWM: %d MiB before, %d MiB after the build", hwm0>>20, hwm>>20)
	if hwm > hwm0+256<<20 {
		t.Errorf("the server's memory peaked at %d MiB (%d MiB before the build)", hwm>>20, hwm0>>20)
	}

	// What the SDK read, paging through the log: the cut line, the marker,
	// the end.
	var cut, marker int
	var bytes int
	var second []string // the second step's lines: its start, not its output
	for _, l := range got {
		bytes += len(l.Message)
		if l.Step == "2" {
			second = append(second, l.Message)
		}
		if strings.HasSuffix(l.Message, template.LineCut) && len(l.Message) == template.MaxLogLine {
			cut++
		}
		if strings.HasPrefix(l.Message, "log truncated: ") {
			marker++
		}
	}
	if len(got) > template.MaxLogEntries+8 || bytes > template.MaxLogBytes+2*template.MaxLogLine || cut != 1 || marker != 1 ||
		got[len(got)-1].Message != "build ready" {
		t.Errorf("the log as the SDK read it: %d entries, %d bytes, %d cut lines, %d markers, ending %q", len(got), bytes, cut, marker, got[len(got)-1].Message)
	}
	if strings.Join(second, "|") != "RUN echo printed-past-the-cap" {
		t.Errorf("the second step's lines past the cap: %q, want its start alone", second)
	}

	// The status answer is a page: 100 entries at most, the log once.
	status := "/templates/" + built.TemplateID + "/builds/" + built.BuildID + "/status"
	for _, tc := range []struct {
		query string
		want  int
	}{{"", 100}, {"?limit=1000", 100}, {"?limit=5&logsOffset=10", 5}, {"?limit=0", 0}, {"?logsOffset=" + strconv.Itoa(len(got)-1), 1}, {"?level=warn", 1}} {
		code, raw := call(t, "GET", p.srv.URL+status+tc.query, nil, "X-API-Key", apiKey)
		var st struct {
			Status     string            `json:"status"`
			Logs       []string          `json:"logs"`
			LogEntries []json.RawMessage `json:"logEntries"`
		}
		if code != 200 || json.Unmarshal([]byte(raw), &st) != nil {
			t.Fatalf("status%s: %d %.200s", tc.query, code, raw)
		}
		if len(st.LogEntries) != tc.want || len(st.Logs) != 0 || len(raw) > 100*(template.MaxLogLine+200) {
			t.Errorf("status%s: %d entries (want %d), %d in logs, %d bytes", tc.query, len(st.LogEntries), tc.want, len(st.Logs), len(raw))
		}
	}
	if code, raw := call(t, "GET", p.srv.URL+status+"?level=loud", nil, "X-API-Key", apiKey); code != 400 {
		t.Errorf("status?level=loud: %d %s", code, raw)
	}
	// Three clients reading the log at once, page by page, as often as
	// they can (three such took the server to 2.94 GB).
	var readers sync.WaitGroup
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for offset := 0; offset < len(got); offset += 100 {
				req, _ := http.NewRequest("GET", p.srv.URL+status+"?logsOffset="+strconv.Itoa(offset), nil)
				req.Header.Set("X-API-Key", apiKey)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	readers.Wait()
	if after := procStatus(t, pid, "VmHWM"); after > hwm0+256<<20 {
		t.Errorf("three clients reading the log took the server's memory to %d MiB", after>>20)
	}

	// Stored within the cap, charged to the team's storage.
	rows, stored := storedLog(t, p, built.BuildID)
	t.Logf("stored: %d entries, %d bytes of messages", rows, stored)
	if rows != len(got) || stored > template.MaxLogBytes+2*template.MaxLogLine {
		t.Errorf("the database holds %d entries (%d bytes) of the build's log; the SDK read %d", rows, stored, len(got))
	}
	_, err = mine.BuildTemplate(ctx, cove.TemplateBuild{Name: "after", Steps: []cove.TemplateStep{{Type: "RUN", Args: []string{"true"}}}}, nil)
	var apiErr *cove.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || !strings.Contains(apiErr.Message, "MiB of build logs") {
		t.Errorf("a build once the team's logs fill its 2 MiB of storage: %v", err)
	}
	t.Logf("the next build: %v", err)

	// Deleted with the template: the team's storage is free again.
	if err := mine.DeleteTemplate(ctx, "noisy"); err != nil {
		t.Fatal(err)
	}
	if rows, _ := storedLog(t, p, built.BuildID); rows != 0 {
		t.Errorf("the deleted template's build log keeps %d entries", rows)
	}
	if _, err := mine.BuildTemplate(ctx, cove.TemplateBuild{Name: "after", Steps: []cove.TemplateStep{{Type: "RUN", Args: []string{"true"}}}}, nil); err != nil {
		t.Errorf("a build once the noisy template went: %v", err)
	}
}

// TestBuildCancel: a team cancels its build whose step sleeps: the build
// ends as cancelled, its processes and build sandbox go and nothing is
// left; another team cannot cancel it, and builds meanwhile. A build
// never started ends at once. A team's builds in progress are capped.
func TestBuildCancel(t *testing.T) {
	p := twoTeams(t, "--network=false", "--pool-size", "0")
	theirs := clientFor(t, p.srv, otherKey)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var created struct{ TemplateID, BuildID string }
	if code := apiJSON(t, p, apiKey, "POST", "/v3/templates", map[string]any{"name": "sleepy"}, &created); code != 202 {
		t.Fatalf("template: %d", code)
	}
	build := "/templates/" + created.TemplateID + "/builds/" + created.BuildID
	if code := apiJSON(t, p, apiKey, "POST", "/v2"+build, map[string]any{"fromTemplate": "base",
		"steps": []map[string]any{{"type": "RUN", "args": []string{"echo sleeping; sleep 600"}}}}, nil); code != 202 {
		t.Fatalf("start the build: %d", code)
	}
	testkit.Eventually(t, 2*time.Minute, func() error {
		if n := sleepers(p); n == 0 {
			return fmt.Errorf("no sleep 600 runs yet")
		}
		return nil
	})
	if code := apiJSON(t, p, apiKey, "DELETE", "/templates/sleepy", nil, nil); code != 409 {
		t.Errorf("delete a template whose build runs: %d, want 409", code)
	}
	if code := apiJSON(t, p, otherKey, "POST", build+"/cancel", nil, nil); code != 404 {
		t.Errorf("another team's cancel: %d, want 404", code)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var theirErr error
	go func() { // the other team, beside
		defer wg.Done()
		_, theirErr = theirs.BuildTemplate(ctx, cove.TemplateBuild{Name: "beside", Steps: []cove.TemplateStep{{Type: "RUN", Args: []string{"echo beside"}}}}, nil)
	}()

	var out struct {
		Status string
		Reason struct{ Message string }
	}
	if code := apiJSON(t, p, apiKey, "POST", build+"/cancel", nil, &out); code != 200 || out.Status != "error" || !strings.Contains(out.Reason.Message, "cancelled") {
		t.Fatalf("cancel: %d %+v", code, out)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if n := sleepers(p); n > 0 {
			return fmt.Errorf("%d sleep 600 still run", n)
		}
		if pids := sandboxPIDs(p.cgroup); len(pids) > 0 {
			return fmt.Errorf("processes in the server's sandboxes: %v", pids)
		}
		return nil
	})
	var st struct {
		Status     string
		Reason     struct{ Message string }
		LogEntries []struct{ Message string }
	}
	if code := apiJSON(t, p, apiKey, "GET", build+"/status", nil, &st); code != 200 || st.Status != "error" || !strings.Contains(st.Reason.Message, "cancelled") ||
		len(st.LogEntries) == 0 || !strings.Contains(st.LogEntries[len(st.LogEntries)-1].Message, "cancelled") {
		t.Errorf("the cancelled build's status: %d %+v", code, st)
	}
	if code := apiJSON(t, p, apiKey, "POST", build+"/cancel", nil, nil); code != 409 {
		t.Errorf("cancel a build that ended: %d, want 409", code)
	}
	wg.Wait()
	if theirErr != nil {
		t.Errorf("the other team's build beside the cancel: %v", theirErr)
	}
	if scratch, _ := filepath.Glob(filepath.Join(p.srv.DataDir, "*", "build-*")); len(scratch) > 0 {
		t.Errorf("the cancelled step's scratch is left: %v", scratch)
	}
	if leaks := p.leaks(); len(leaks) > 0 {
		t.Errorf("left by the cancelled build: %v", leaks)
	}
	if code := apiJSON(t, p, apiKey, "DELETE", "/templates/sleepy", nil, nil); code != 204 {
		t.Errorf("delete the cancelled build's template: %d", code)
	}

	// A build never started ends at once (the Go SDK's call).
	if code := apiJSON(t, p, apiKey, "POST", "/v3/templates", map[string]any{"name": "waiting"}, &created); code != 202 {
		t.Fatalf("template: %d", code)
	}
	if status, err := client(t, p.srv).CancelBuild(ctx, created.TemplateID, created.BuildID); err != nil || status != "error" {
		t.Errorf("cancel a waiting build: %q %v", status, err)
	}
	if code := apiJSON(t, p, apiKey, "POST", "/v2/templates/"+created.TemplateID+"/builds/"+created.BuildID, map[string]any{"fromTemplate": "base"}, nil); code != 409 {
		t.Errorf("start a cancelled build: %d, want 409", code)
	}

	// A team's builds in progress are capped: the next is a 429 until one
	// ends; another team's go on.
	start := func(key, name string) (build string, code int) {
		t.Helper()
		var c struct{ TemplateID, BuildID string }
		if code := apiJSON(t, p, key, "POST", "/v3/templates", map[string]any{"name": name, "memoryMB": 128}, &c); code != 202 {
			t.Fatalf("template %s: %d", name, code)
		}
		build = "/templates/" + c.TemplateID + "/builds/" + c.BuildID
		return build, apiJSON(t, p, key, "POST", "/v2"+build, map[string]any{"fromTemplate": "base",
			"steps": []map[string]any{{"type": "RUN", "args": []string{"sleep 600"}}}}, nil)
	}
	var running []string
	for i := range service.MaxTeamBuilds {
		build, code := start(apiKey, fmt.Sprintf("slot-%d", i))
		if code != 202 {
			t.Fatalf("build %d of the team's %d: %d", i+1, service.MaxTeamBuilds, code)
		}
		running = append(running, build)
	}
	if _, code := start(apiKey, "slot-over"); code != 429 {
		t.Errorf("a build past the team's %d: %d, want 429", service.MaxTeamBuilds, code)
	}
	theirBuild, code := start(otherKey, "their-slot")
	if code != 202 {
		t.Errorf("another team's build while this one's are at their cap: %d", code)
	}
	if code := apiJSON(t, p, apiKey, "POST", running[0]+"/cancel", nil, nil); code != 200 {
		t.Errorf("cancel: %d", code)
	}
	again, code := start(apiKey, "slot-again")
	if code != 202 {
		t.Errorf("a build once one of the team's ended: %d", code)
	}
	for _, b := range append(running[1:], again) {
		if code := apiJSON(t, p, apiKey, "POST", b+"/cancel", nil, nil); code != 200 {
			t.Errorf("cancel %s: %d", b, code)
		}
	}
	if code := apiJSON(t, p, otherKey, "POST", theirBuild+"/cancel", nil, nil); code != 200 {
		t.Errorf("cancel the other team's: %d", code)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if n := sleepers(p); n > 0 {
			return fmt.Errorf("%d sleep 600 still run", n)
		}
		return nil
	})
}

// clientFor talks to s with key.
func clientFor(t testing.TB, s testutil.Server, key string) *cove.Client {
	t.Helper()
	c, err := cove.NewClient(cove.WithAPIURL(s.URL), cove.WithSandboxURL(s.URL), cove.WithAPIKey(key))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// procStatus reads a field in kB of /proc/<pid>/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// storedLog counts a build's log in the server's database.
func storedLog(t *testing.T, p *coveProc, buildID string) (rows int, bytes int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(p.srv.DataDir, "cove.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT count(*), COALESCE(SUM(length(CAST(message AS BLOB))), 0) FROM build_logs WHERE build_id = ?`, buildID).Scan(&rows, &bytes); err != nil {
		t.Fatal(err)
	}
	return rows, bytes
}

// sleepers counts the processes of p's sandboxes running "sleep 600".
func sleepers(p *coveProc) int {
	n := 0
	for _, pid := range sandboxPIDs(p.cgroup) {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && string(b) == "sleep\x00600\x00" {
			n++
		}
	}
	return n
}
