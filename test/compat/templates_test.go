package compat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"

	"github.com/covesandbox/cove/internal/testutil"
)

// TestTemplatesPaged: E2B 2.64's Template.list pages GET /v2/templates
// (limit, nextToken, X-Next-Token), newest first, and Template.delete is
// DELETE /templates/{id}.
func TestTemplatesPaged(t *testing.T) {
	srv := testutil.StartServer(t, apiKey)
	c, err := cove.NewClient(cove.WithAPIURL(srv.URL), cove.WithSandboxURL(srv.URL), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var built []string
	for _, name := range []string{"paged-a", "paged-b", "paged-c"} {
		info, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: name, Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"NAME", name}}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		built = append(built, info.TemplateID)
	}
	page := func(query string) ([]string, string, int) {
		t.Helper()
		ids, next, code := listIDs(t, srv.URL, "/v2/templates"+query, "templateID")
		// The built-in templates are listed too.
		return slices.DeleteFunc(ids, func(id string) bool { return !slices.Contains(built, id) }), next, code
	}
	var seen []string
	query := "?limit=1"
	for pages := 0; ; pages++ {
		ids, next, code := page(query)
		if code != http.StatusOK || pages > 20 {
			t.Fatalf("page %d: %d", pages, code)
		}
		seen = append(seen, ids...)
		if next == "" {
			break
		}
		query = "?limit=1&nextToken=" + next
	}
	if want := []string{built[2], built[1], built[0]}; !slices.Equal(seen, want) {
		t.Errorf("pages of one: %v, want the newest first %v", seen, want)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?nextToken=garbage!"} {
		if _, _, code := page(q); code != http.StatusBadRequest {
			t.Errorf("GET /v2/templates%s: %d, want 400", q, code)
		}
	}
	if code, m := apiCall(t, srv.URL, "DELETE", "/templates/"+built[1], ""); code != http.StatusNoContent {
		t.Fatalf("delete: %d %v", code, m)
	}
	if ids, _, _ := page(""); !slices.Equal(ids, []string{built[2], built[0]}) {
		t.Errorf("after the delete: %v", ids)
	}
}

// TestResizableSandboxes: a template built with maxCpuCount and
// maxMemoryMB (E2B 2.64, 2.66) says so in its info, list and builds; a
// create asks for a size up to them, which its cgroups enforce and what
// runs inside sees (lxcfs), on namespaces and gVisor; past them, or
// beyond a template without maxima, is a 400 naming the limit.
func TestResizableSandboxes(t *testing.T) {
	for _, isolation := range []string{"namespaces", "gvisor"} {
		t.Run(isolation, func(t *testing.T) {
			if isolation == "gvisor" {
				testutil.NeedRunsc(t)
			}
			srv := testutil.StartServer(t, apiKey, "--default-isolation", isolation, "--team-max-memory-mb", "1024")
			c, err := cove.NewClient(cove.WithAPIURL(srv.URL), cove.WithSandboxURL(srv.URL), cove.WithAPIKey(apiKey))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			info, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: "sized", CPUCount: 1, MemoryMB: 256, MaxCPUCount: 2, MaxMemoryMB: 512,
				Steps: []cove.TemplateStep{{Type: "ENV", Args: []string{"SIZED", "1"}}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{`{"name":"bad","cpuCount":2,"maxCpuCount":1}`, `{"name":"bad","memoryMB":512,"maxMemoryMB":256}`, `{"name":"bad","maxCpuCount":65}`} {
				if code, m := apiCall(t, srv.URL, "POST", "/v3/templates", body); code != http.StatusBadRequest {
					t.Errorf("a build %s: %d %v, want 400", body, code, m)
				}
			}
			code, tpl := apiCall(t, srv.URL, "GET", "/templates/"+info.TemplateID, "")
			builds, _ := tpl["builds"].([]any)
			if code != 200 || tpl["maxCpuCount"] != 2.0 || tpl["maxMemoryMB"] != 512.0 || len(builds) != 1 ||
				builds[0].(map[string]any)["maxCpuCount"] != 2.0 || builds[0].(map[string]any)["maxMemoryMB"] != 512.0 {
				t.Errorf("the template's info: %d %v", code, tpl)
			}
			sees := func(s *cove.Sandbox) string {
				r, err := s.Commands.Run(ctx, `free -m | awk '/^Mem:/ {print $2}'; python3 -c 'import os; print(os.cpu_count())'`)
				if err != nil {
					t.Fatal(err)
				}
				return strings.ReplaceAll(strings.TrimSpace(r.Stdout), "\n", " ")
			}
			for _, c2 := range []struct {
				opts      cove.CreateOptions
				cpu, mem  int
				sees      string
				refused   string
				isolation string
			}{
				{opts: cove.CreateOptions{Template: "sized"}, cpu: 1, mem: 256, sees: "256 1"},
				{opts: cove.CreateOptions{Template: "sized", CPUCount: 2, MemoryMB: 512}, cpu: 2, mem: 512, sees: "512 2"},
				{opts: cove.CreateOptions{Template: "sized", MemoryMB: 384}, cpu: 1, mem: 384, sees: "384 1"},
				{opts: cove.CreateOptions{Template: "sized", CPUCount: 3}, refused: "cpuCount 3: template " + info.TemplateID + " allows at most 2 (its maxCpuCount)"},
				{opts: cove.CreateOptions{Template: "sized", MemoryMB: 1024}, refused: "memoryMB 1024: template " + info.TemplateID + " allows at most 512 (its maxMemoryMB)"},
				{opts: cove.CreateOptions{Template: "sized", MemoryMB: 64}, refused: "memoryMB must be 128 to 65536"},
			} {
				s, err := c.Create(ctx, c2.opts)
				if c2.refused != "" {
					var apiErr *cove.APIError
					if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(err.Error(), c2.refused) {
						t.Errorf("create %+v: %v, want 400 %q", c2.opts, err, c2.refused)
					}
					continue
				}
				if err != nil {
					t.Fatalf("create %+v: %v", c2.opts, err)
				}
				got, err := s.Info(ctx)
				if err != nil || got.CPUCount != c2.cpu || got.MemoryMB != c2.mem {
					t.Errorf("create %+v: info %+v %v, want %d CPUs and %d MiB", c2.opts, got, err, c2.cpu, c2.mem)
				}
				want := c2.sees
				if isolation == "gvisor" && c2.cpu < 2 {
					// gVisor's kernel shows at least 2 CPUs whatever the
					// quota (runsc's --cpu-num-from-quota floor); the
					// quota still holds the sandbox to its one.
					want = strings.Replace(want, " 1", " 2", 1)
				}
				if seen := sees(s); seen != want {
					t.Errorf("create %+v: inside, free -m and cpu_count say %q, want %q", c2.opts, seen, want)
				}
				if c2.opts.CPUCount == 2 { // a fork keeps its parent's size
					kids, err := s.Fork(ctx, 1, time.Minute)
					if err != nil || len(kids) != 1 {
						t.Fatalf("fork: %v %v", kids, err)
					}
					if got, err := kids[0].Info(ctx); err != nil || got.CPUCount != 2 || got.MemoryMB != 512 {
						t.Errorf("the fork of a sandbox of 2 CPUs and 512 MiB: %+v %v", got, err)
					}
					kids[0].Kill(ctx)
				}
				if err := s.Kill(ctx); err != nil {
					t.Error(err)
				}
			}
			resizeAtResume(ctx, t, c, srv.URL, info.TemplateID, isolation, sees)
			if left := srv.Leftovers(); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// resizeAtResume: a connect that resumes a paused sandbox with
// onResume's sizes (E2B 2.66; no installed SDK sends them: the requests
// are written from E2B's facts) resumes it with that size, which its
// info, its metrics and (namespaces) what runs inside report; past the
// template's maximum it is a 400 and past the team's quota (1024 MiB; the
// sandbox's old size not counted) a 429, the sandbox left paused as it
// was; a connect to a running sandbox leaves its size alone; a reboot
// boots it afresh at the size asked.
func resizeAtResume(ctx context.Context, t *testing.T, c *cove.Client, url, tplID, isolation string, sees func(*cove.Sandbox) string) {
	t.Helper()
	a, err := c.Create(ctx, cove.CreateOptions{Template: "sized"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill(ctx)
	b, err := c.Create(ctx, cove.CreateOptions{Template: "sized", MemoryMB: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill(ctx)
	if err := a.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	size := func(what string, wantCPU, wantMem float64, wantState string) {
		t.Helper()
		code, got := apiCall(t, url, "GET", "/sandboxes/"+a.ID, "")
		if code != 200 || got["cpuCount"] != wantCPU || got["memoryMB"] != wantMem || got["state"] != wantState {
			t.Errorf("%s: GET /sandboxes/%s: %d %v, want %s with %g CPUs and %g MiB", what, a.ID, code, got, wantState, wantCPU, wantMem)
		}
	}
	connect := `{"timeout":300,"onResume":{"action":"restore","memoryMB":%d,"cpuCount":2}}`
	for _, r := range []struct {
		memoryMB int
		status   int
		says     string
	}{
		{1024, http.StatusBadRequest, "memoryMB 1024: template " + tplID + " allows at most 512 (its maxMemoryMB)"},
		{64, http.StatusBadRequest, "memoryMB must be 128 to 65536"},
		// 512 + 512 + the third sandbox's 256 pass the quota.
		{512, http.StatusTooManyRequests, "memory"},
	} {
		var third *cove.Sandbox
		if r.status == http.StatusTooManyRequests {
			if third, err = c.Create(ctx, cove.CreateOptions{Template: "sized"}); err != nil {
				t.Fatal(err)
			}
		}
		code, got := apiCall(t, url, "POST", "/sandboxes/"+a.ID+"/connect", fmt.Sprintf(connect, r.memoryMB))
		if msg, _ := got["message"].(string); code != r.status || !strings.Contains(msg, r.says) {
			t.Errorf("connect with memoryMB %d: %d %v, want %d saying %q", r.memoryMB, code, got, r.status, r.says)
		}
		size(fmt.Sprintf("after the refused memoryMB %d", r.memoryMB), 1, 256, "paused")
		if third != nil {
			third.Kill(ctx)
		}
	}
	// 512 + 512 fill the quota: the old 256 is not counted.
	code, got := apiCall(t, url, "POST", "/v2/sandboxes/"+a.ID+"/connect", fmt.Sprintf(connect, 512))
	if code != http.StatusCreated {
		t.Fatalf("connect with onResume's sizes: %d %v, want 201", code, got)
	}
	size("resumed", 2, 512, "running")
	want := "512 2"
	if isolation == "gvisor" {
		want = "256 2" // its kernel keeps the view it booted with
	}
	if seen := sees(a); seen != want {
		t.Errorf("resumed with 2 CPUs and 512 MiB: inside, free -m and cpu_count say %q, want %q", seen, want)
	}
	// nproc answers OMP_NUM_THREADS, which the agent was told.
	if r, err := a.Commands.Run(ctx, "nproc"); err != nil || strings.TrimSpace(r.Stdout) != "2" {
		t.Errorf("resumed with 2 CPUs: nproc says %q (%v), want 2", r.Stdout, err)
	}
	if code, got := apiCall(t, url, "POST", "/sandboxes/"+a.ID+"/connect", fmt.Sprintf(connect, 256)); code != http.StatusOK {
		t.Errorf("connect to the running sandbox with a size: %d %v, want 200", code, got)
	}
	size("a connect with a size to it running", 2, 512, "running")
	// Booted afresh over its files, at another size.
	if err := a.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if code, got := apiCall(t, url, "POST", "/sandboxes/"+a.ID+"/connect", `{"onResume":{"action":"reboot","memoryMB":384,"cpuCount":1}}`); code != http.StatusCreated {
		t.Fatalf("connect with a reboot and a size: %d %v, want 201", code, got)
	}
	size("rebooted", 1, 384, "running")
	want = "384 1"
	if isolation == "gvisor" {
		want = "384 2" // booted anew: its kernel's view is the new size, at least 2 CPUs
	}
	if seen := sees(a); seen != want {
		t.Errorf("rebooted with 1 CPU and 384 MiB: inside, free -m and cpu_count say %q, want %q", seen, want)
	}
}
