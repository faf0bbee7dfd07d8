package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/template"
)

// snapshotJSON is E2B's SnapshotInfo.
type snapshotJSON struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func toSnapshot(r template.Record) snapshotJSON {
	out := snapshotJSON{SnapshotID: r.SnapshotID(), Names: []string{}}
	for _, n := range r.Names {
		out.Names = append(out.Names, n+":"+template.DefaultTag)
	}
	return out
}

// createSnapshot serves POST /sandboxes/{id}/snapshots ({"name"?}): 201
// with the snapshot's id, which creates sandboxes from it as a template
// does. The sandbox goes on.
func (a *API) createSnapshot(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	rec, err := a.svc.CreateSnapshot(r.Context(), team(r), id, body.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSnapshot(rec))
}
