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

// createSnapshot serves POST /sandboxes/{id}/snapshots ({"name"?,
// "memory"?}): 201 with the snapshot's id, which creates sandboxes from it
// as a template does. With "memory": false (the SDK's mode "filesystem")
// it holds the files alone, whatever the driver could keep. The sandbox
// goes on.
func (a *API) createSnapshot(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var body struct {
		Name   string `json:"name"`
		Memory *bool  `json:"memory"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	rec, err := a.svc.CreateSnapshot(r.Context(), team(r), id, body.Name, body.Memory == nil || *body.Memory)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toSnapshot(rec))
}
