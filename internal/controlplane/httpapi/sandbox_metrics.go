package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/errs"
)

// metrics serves GET /sandboxes/{id}/metrics?start=&end=: the sandbox's
// kept samples between start and end (unix seconds, inclusive; either may
// be left out), oldest first.
func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	bounds, err := window(r)
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := a.svc.Metrics(r.Context(), team(r), id, bounds[0], bounds[1])
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]metricJSON, len(list))
	for i, m := range list {
		out[i] = toMetric(m)
	}
	writeJSON(w, http.StatusOK, out)
}

// window reads a metrics request's start and end (unix seconds; either
// may be left out: zero).
func window(r *http.Request) ([2]time.Time, error) {
	var bounds [2]time.Time
	for i, name := range []string{"start", "end"} {
		v := r.URL.Query().Get(name)
		if v == "" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec < 0 {
			return bounds, errs.New(errs.InvalidArgument, "%s must be a unix time in seconds: %q", name, v)
		}
		bounds[i] = time.Unix(sec, 0)
	}
	if !bounds[0].IsZero() && !bounds[1].IsZero() && bounds[1].Before(bounds[0]) {
		return bounds, errs.New(errs.InvalidArgument, "end is before start")
	}
	return bounds, nil
}

// metricsMany serves GET /sandboxes/metrics?sandbox_ids=a,b: each found
// sandbox's latest sample.
func (a *API) metricsMany(w http.ResponseWriter, r *http.Request) {
	ids := strings.Split(r.URL.Query().Get("sandbox_ids"), ",")
	out := map[string]metricJSON{}
	for _, id := range ids {
		if id == "" {
			continue
		}
		list, err := a.svc.Metrics(r.Context(), team(r), id, time.Time{}, time.Time{})
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
		out[id] = toMetric(list[len(list)-1])
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": out})
}
