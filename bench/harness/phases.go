package main

import (
	"fmt"
	"net/http"
	"slices"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// phases prints, from a server's Prometheus metrics (its
// --metrics-listen address), each phase of its creates, warm sandboxes and
// kills so far: the median (interpolated in the histogram's buckets, as
// Prometheus's histogram_quantile does) and the mean, in the order a
// create runs them.
func phases(metricsURL string) {
	resp, err := http.Get(metricsURL)
	check(err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	check(err)
	f := fams["cove_sandbox_phase_seconds"]
	if f == nil {
		check(fmt.Errorf("%s has no cove_sandbox_phase_seconds", metricsURL))
	}
	ms := f.GetMetric()
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if a, b := label(ms[i], "op"), label(ms[j], "op"); a != b {
			return a < b
		}
		return slices.Index(phaseOrder[label(ms[i], "op")], label(ms[i], "phase")) < slices.Index(phaseOrder[label(ms[j], "op")], label(ms[j], "phase"))
	})
	for _, m := range ms {
		h := m.GetHistogram()
		n := h.GetSampleCount()
		if n == 0 {
			continue
		}
		fmt.Printf("BenchmarkPhase/%s/%s %d 0 ns/op %.3f p50-ms %.3f mean-ms\n", label(m, "op"), label(m, "phase"), n,
			1000*quantile(h, 0.5), 1000*h.GetSampleSum()/float64(n))
	}
}

// phaseOrder is each op's phases in the order they run.
var phaseOrder = map[string][]string{
	"create": {"admit", "handover", "network", "spawn", "cgroup", "config", "bundle", "runsc", "agent_ready", "driver_record", "driver", "record", "start_command"},
	"warm":   {"network", "spawn", "cgroup", "config", "bundle", "runsc", "agent_ready", "driver_record", "driver", "first_command", "start_command"},
	"kill":   {"kill_init", "cgroup", "files", "destroy", "network", "record"},
}

// quantile interpolates q in a histogram's cumulative buckets.
func quantile(h *dto.Histogram, q float64) float64 {
	rank := q * float64(h.GetSampleCount())
	var lower, below float64
	for _, b := range h.GetBucket() {
		upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if count >= rank {
			if count == below {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/(count-below)
		}
		lower, below = upper, count
	}
	return lower
}
