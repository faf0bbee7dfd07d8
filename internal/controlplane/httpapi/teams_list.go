package httpapi

import (
	"net/http"
)

// teamJSON is E2B's Team.
type teamJSON struct {
	TeamID    string `json:"teamID"`
	Name      string `json:"name"`
	APIKey    string `json:"apiKey"`
	IsDefault bool   `json:"isDefault"`
}

// listTeams serves GET /teams: the caller's team. Keys are kept hashed:
// apiKey is the key the request came with ("" for the dashboard's session
// and the admin token).
func (a *API) listTeams(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	t, err := a.store.Team(r.Context(), c.team)
	if err != nil {
		writeError(w, err)
		return
	}
	out := teamJSON{TeamID: t.ID, Name: t.Name, IsDefault: true}
	if c.kind == byKey {
		out.APIKey = r.Header.Get("X-API-Key")
	}
	writeJSON(w, http.StatusOK, []teamJSON{out})
}
