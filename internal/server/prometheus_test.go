package server_test

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/server"
)

// TestPrometheusMetrics: cove server's /metrics (on --metrics-listen)
// parses as Prometheus text and counts what the test did: sandboxes by
// state, creates, a kill, pauses and a resume, the memory the node
// promised, the networks handed out, the API's requests by route and
// status, a request through the sandbox proxy.
func TestPrometheusMetrics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := startWith(t, func(c *server.Config) {
		c.MetricsListen, c.PoolSize = addr, 0
		c.Network = &network.Config{Range: netip.MustParsePrefix("198.19.251.0/24"), Table: fmt.Sprintf("cove-test-prom-%d", os.Getpid()), PoolSize: 1}
	})
	var ids, tokens []string
	began := time.Now()
	for range 3 {
		code, m, raw := s.do(t, "POST", "/v2/sandboxes", keyA, `{"timeout":120}`)
		if code != 201 {
			t.Fatalf("create: %d %s", code, raw)
		}
		ids = append(ids, m["sandboxID"].(string))
		tok, _ := m["envdAccessToken"].(string)
		tokens = append(tokens, tok)
	}
	if code, _, raw := s.do(t, "DELETE", "/sandboxes/"+ids[0], keyA, ""); code != 204 {
		t.Fatalf("kill: %d %s", code, raw)
	}
	for _, op := range []string{"pause", "resume"} {
		if code, _, raw := s.do(t, "POST", "/sandboxes/"+ids[1]+"/"+op, keyA, `{"timeout":60}`); code >= 300 {
			t.Fatalf("%s: %d %s", op, code, raw)
		}
	}
	if code, _, raw := s.do(t, "POST", "/sandboxes/"+ids[2]+"/pause", keyA, `{}`); code != 204 {
		t.Fatalf("pause: %d %s", code, raw)
	}

	// A process started through the proxy; a template built.
	if out, err := run(t.Context(), s.url, ids[1], tokens[1], "echo started"); err != nil || out != "started\n" {
		t.Fatalf("a process: %q %v", out, err)
	}
	code, m, raw := s.do(t, "POST", "/v3/templates", keyA, `{"name":"prom-built"}`)
	if code != 202 {
		t.Fatalf("template: %d %s", code, raw)
	}
	buildTemplate(t, s, s, m["templateID"].(string), m["buildID"].(string), `{"fromTemplate":"base","steps":[{"type":"ENV","args":["BUILT","1"]}]}`)

	// A request to the sandbox's agent through the proxy.
	req, _ := http.NewRequest("GET", s.url+"/health", nil)
	req.Host = "49983-" + ids[1] + ".localhost"
	proxied, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	proxied.Body.Close()

	// The proxy counts a request when its handler returns, which may be
	// after the client has read the answer (the proxy flushes): scrape
	// until the proxied request is counted.
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("/metrics is not Prometheus text: %v", err)
		}
		return fams
	}
	proxiedCode := map[string]string{"code": strconv.Itoa(proxied.StatusCode)}
	fams := scrape()
	for deadline := time.Now().Add(10 * time.Second); sumFamily(fams["cove_proxy_requests_total"], proxiedCode) < 1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		fams = scrape()
	}
	// value sums a family's samples whose labels include want.
	value := func(name string, want map[string]string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		return sumFamily(f, want)
	}
	for _, c := range []struct {
		name string
		want map[string]string
		is   float64
	}{
		{"cove_sandboxes", map[string]string{"state": "running", "template": "base", "driver": "namespaces"}, 1},
		{"cove_sandboxes", map[string]string{"state": "paused"}, 1},
		{"cove_sandbox_create_seconds", map[string]string{"source": "cold", "driver": "namespaces"}, 3},
		{"cove_sandbox_kill_seconds", nil, 1},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "admit"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "network"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "spawn"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "cgroup"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "config"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "agent_ready"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "driver_record"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "driver"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "create", "phase": "record"}, 3},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "kill", "phase": "kill_init"}, 1},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "kill", "phase": "cgroup"}, 1},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "kill", "phase": "files"}, 1},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "kill", "phase": "destroy"}, 1},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "kill", "phase": "network"}, 1},
		{"cove_sandbox_phase_seconds", map[string]string{"op": "kill", "phase": "record"}, 1},
		{"cove_sandbox_pause_seconds", map[string]string{"memory": "true"}, 2},
		{"cove_sandbox_resume_seconds", nil, 1},
		{"cove_sandbox_transitions_total", map[string]string{"from": "running", "to": "paused"}, 2},
		{"cove_sandbox_transitions_total", map[string]string{"from": "paused", "to": "running"}, 1},
		{"cove_api_requests_total", map[string]string{"route": "POST /v2/sandboxes", "code": "201"}, 3},
		{"cove_api_requests_total", map[string]string{"route": "DELETE /sandboxes/{id}", "code": "204"}, 1},
		{"cove_api_request_seconds", map[string]string{"route": "POST /sandboxes/{id}/pause"}, 2},
		{"cove_proxy_requests_total", proxiedCode, 1},
		{"cove_proxy_requests_total", map[string]string{"code": "200"}, 1}, // the process
		{"cove_process_start_seconds", nil, 1},
		{"cove_template_build_seconds", map[string]string{"status": "ready"}, 1},
		{"cove_networks", map[string]string{"state": "in_use"}, 2}, // the killed one's was released
	} {
		if got := value(c.name, c.want); got != c.is {
			t.Errorf("%s%v = %v, want %v", c.name, c.want, got, c.is)
		}
	}
	committed, capacity := value("cove_node_memory_committed_bytes", nil), value("cove_node_memory_capacity_bytes", nil)
	if committed <= 0 || committed > capacity {
		t.Errorf("memory committed %v of %v", committed, capacity)
	}
	// Two sandboxes, each promised 384 MiB of writable layer.
	if disk, size := value("cove_node_disk_committed_bytes", nil), value("cove_node_disk_capacity_bytes", nil); disk != 2*384<<20 || size <= 0 || value("cove_node_disk_free_bytes", nil) > size {
		t.Errorf("disk committed %v of %v", disk, size)
	}
	if value("go_goroutines", nil) <= 0 {
		t.Error("no Go runtime metrics")
	}
	// The team's usage: the seconds its three sandboxes ran (at most the
	// time since the first create, each), and their limits over them.
	team := map[string]string{"team": "default", "template": "base"}
	secs, cpu, mem := value("cove_team_sandbox_seconds_total", team), value("cove_team_cpu_seconds_total", team), value("cove_team_memory_gib_seconds_total", team)
	_, info, _ := s.do(t, "GET", "/sandboxes/"+ids[1], keyA, "")
	cpus, memMB := info["cpuCount"].(float64), info["memoryMB"].(float64)
	if secs <= 0 || secs > 3*time.Since(began).Seconds() || math.Abs(cpu-secs*cpus) > 1e-6*cpu || math.Abs(mem-secs*memMB/1024) > 1e-6*mem {
		t.Errorf("team usage: %v s, %v CPU-s, %v GiB-s (sandboxes of %v CPUs and %v MiB)", secs, cpu, mem, cpus, memMB)
	}
}

// sumFamily sums f's samples whose labels include want: gauges' and
// counters' values, histograms' counts.
func sumFamily(f *dto.MetricFamily, want map[string]string) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
