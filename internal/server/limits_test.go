package server_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSandboxSeesItsLimits: a program inside a sandbox of 1 CPU and 256
// MiB finds those, not the host's: nproc (OMP_NUM_THREADS), /proc/cpuinfo
// and /proc/stat (lxcfs), Node's os.cpus() and Python's os.cpu_count()
// (which read them), free (lxcfs's /proc/meminfo).
func TestSandboxSeesItsLimits(t *testing.T) {
	s := start(t)
	code, m, raw := s.do(t, "POST", "/v3/templates", keyA, `{"name":"one-cpu","cpuCount":1,"memoryMB":256}`)
	if code != 202 {
		t.Fatalf("template: %d %s", code, raw)
	}
	tplID, build := m["templateID"].(string), m["buildID"].(string)
	buildTemplate(t, s, s, tplID, build, `{"fromTemplate":"base","steps":[{"type":"ENV","args":["K","v"]}]}`)
	code, m, raw = s.do(t, "POST", "/v2/sandboxes", keyA, `{"templateID":"one-cpu","timeout":60}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	id, tok := m["sandboxID"].(string), m["envdAccessToken"].(string)
	defer s.do(t, "DELETE", "/sandboxes/"+id, keyA, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := run(ctx, s.url, id, tok, `nproc; grep -c ^processor /proc/cpuinfo; grep -c '^cpu[0-9]' /proc/stat; node -e 'console.log(require("os").cpus().length)'; python3 -c 'import os; print(os.cpu_count())'; free -m | awk '/^Mem:/ {print $2}'`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(out), " "); got != "1 1 1 1 1 256" {
		t.Errorf("nproc, cpuinfo, stat, os.cpus(), os.cpu_count(), free's total: %q, want 1 1 1 1 1 256", got)
	}
}
