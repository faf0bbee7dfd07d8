package httpapi

import (
	"net/http"
	"strconv"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// listSnapshots serves GET /snapshots: the team's snapshots, newest
// first, of sandboxID and named name when given, in pages of limit (≤ 100)
// continued by the X-Next-Token header's value.
func (a *API) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := maxListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			writeError(w, errs.New(errs.InvalidArgument, "limit must be between 1 and %d", maxListLimit))
			return
		}
		limit = n
	}
	list := a.svc.Snapshots(team(r), q.Get("sandboxID"), q.Get("name"))
	if tok := q.Get("nextToken"); tok != "" {
		c, err := decodeCursor(tok)
		if err != nil {
			writeError(w, err)
			return
		}
		for len(list) > 0 && !(list[0].CreatedAt.Before(c.StartedAt) || list[0].CreatedAt.Equal(c.StartedAt) && list[0].ID > c.ID) {
			list = list[1:]
		}
	}
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		w.Header().Set("X-Next-Token", encodeCursor(store.Cursor{StartedAt: last.CreatedAt, ID: last.ID}))
	}
	out := make([]snapshotJSON, len(list))
	for i, rec := range list {
		out[i] = toSnapshot(rec)
	}
	writeJSON(w, http.StatusOK, out)
}
