package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
)

// listEvents serves GET /events/sandboxes and GET
// /events/sandboxes/{sandboxID}: the team's lifecycle events (one
// sandbox's), newest first unless orderAsc=true, a page of limit
// (default 100) from offset, of types (comma-separated or repeated; none:
// all), each as its webhooks receive it.
func (a *API) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	eq := service.EventQuery{Team: team(r), SandboxID: r.PathValue("sandboxID"), Limit: 100, Ascending: q.Get("orderAsc") == "true"}
	for _, p := range []struct {
		name string
		to   *int
	}{{"limit", &eq.Limit}, {"offset", &eq.Offset}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				writeError(w, errs.New(errs.InvalidArgument, "%s %q: not a number", p.name, v))
				return
			}
			*p.to = n
		}
	}
	for _, t := range q["types"] {
		for _, one := range strings.Split(t, ",") {
			if one = strings.TrimSpace(one); one != "" {
				eq.Types = append(eq.Types, one)
			}
		}
	}
	events, err := a.svc.Events(r.Context(), eq)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]json.RawMessage, 0, len(events))
	for _, e := range events {
		out = append(out, e.Body)
	}
	writeJSON(w, http.StatusOK, out)
}
