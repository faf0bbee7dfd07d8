package httpapi

import (
	"net/http"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// metrics serves GET /sandboxes/{id}/metrics: the current sample.
func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := a.svc.Metrics(r.Context(), team(r), id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, []metricJSON{toMetric(m)})
}

// metricsMany serves GET /sandboxes/metrics?sandbox_ids=a,b.
func (a *API) metricsMany(w http.ResponseWriter, r *http.Request) {
	ids := strings.Split(r.URL.Query().Get("sandbox_ids"), ",")
	out := map[string]metricJSON{}
	for _, id := range ids {
		if id == "" {
			continue
		}
		m, err := a.svc.Metrics(r.Context(), team(r), id)
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
		out[id] = toMetric(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}
