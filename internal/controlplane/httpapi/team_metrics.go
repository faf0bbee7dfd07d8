package httpapi

import (
	"net/http"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
)

// teamMetricJSON is E2B's TeamMetric.
type teamMetricJSON struct {
	TimestampUnix       int64   `json:"timestampUnix"`
	Timestamp           string  `json:"timestamp"` // deprecated by E2B, still sent
	ConcurrentSandboxes int     `json:"concurrentSandboxes"`
	SandboxStartRate    float64 `json:"sandboxStartRate"`
}

// teamMetrics serves GET /teams/{teamID}/metrics?start=&end=: the
// caller's team's samples (concurrent sandboxes, starts per second), oldest
// first; another team is 404.
func (a *API) teamMetrics(w http.ResponseWriter, r *http.Request) {
	list, ok := a.teamSamples(w, r)
	if !ok {
		return
	}
	out := make([]teamMetricJSON, len(list))
	for i, m := range list {
		out[i] = teamMetricJSON{TimestampUnix: m.At.Unix(), Timestamp: m.At.UTC().Format(time.RFC3339),
			ConcurrentSandboxes: m.ConcurrentSandboxes, SandboxStartRate: m.StartRate}
	}
	writeJSON(w, http.StatusOK, out)
}

// teamMetricsMax serves GET /teams/{teamID}/metrics/max?start=&end=&metric=
// (concurrent_sandboxes or sandbox_start_rate): E2B's MaxTeamMetric, the
// largest value in the window and when it was (404 when no sample is).
func (a *API) teamMetricsMax(w http.ResponseWriter, r *http.Request) {
	pick := map[string]func(service.TeamMetric) float64{
		"concurrent_sandboxes": func(m service.TeamMetric) float64 { return float64(m.ConcurrentSandboxes) },
		"sandbox_start_rate":   func(m service.TeamMetric) float64 { return m.StartRate },
	}[r.URL.Query().Get("metric")]
	if pick == nil {
		writeError(w, errs.New(errs.InvalidArgument, "metric must be concurrent_sandboxes or sandbox_start_rate"))
		return
	}
	list, ok := a.teamSamples(w, r)
	if !ok {
		return
	}
	if len(list) == 0 {
		writeError(w, errs.New(errs.NotFound, "no samples of the team in that window"))
		return
	}
	best := list[0]
	for _, m := range list[1:] {
		if pick(m) > pick(best) {
			best = m
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"timestampUnix": best.At.Unix(), "timestamp": best.At.UTC().Format(time.RFC3339), "value": pick(best)})
}

func (a *API) teamSamples(w http.ResponseWriter, r *http.Request) ([]service.TeamMetric, bool) {
	bounds, err := window(r)
	if err == nil {
		var list []service.TeamMetric
		if list, err = a.svc.TeamMetrics(r.Context(), team(r), r.PathValue("teamID"), bounds[0], bounds[1]); err == nil {
			return list, true
		}
	}
	writeError(w, err)
	return nil, false
}
